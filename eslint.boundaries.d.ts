import type { Linter } from 'eslint';

/** The layering rules of docs/architecture.md as flat-config entries (eslint.boundaries.js). */
export declare const boundaries: Linter.Config[];
