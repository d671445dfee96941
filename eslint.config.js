// ESLint flat config: typescript-eslint's strict type-checked rules, and the layering rules
// of docs/architecture.md (eslint.boundaries.js). Formatting is Prettier's (npm run format).
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';
import { boundaries } from './eslint.boundaries.js';

export default defineConfig(
  { ignores: ['dist/', 'coverage/', 'data/', 'node_modules/', 'clients/typescript/src/schema.ts'] },
  js.configs.recommended,
  tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
  },
  {
    rules: {
      // Numbers read naturally in messages ("Order 7 not found"); objects and nullish values
      // are still refused.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      // Fastify's callback hooks end with `return done()`: returning the void call from a
      // void function is the idiom, not a mistake. A void value used anywhere else is still one.
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreVoidReturningFunctions: true }],
      // Fastify plugins, Kysely's migration provider and driver methods are async by contract
      // (the framework awaits them) whether or not their body awaits anything.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // Tests read response bodies as `any` (inject's json()) and assert on them with expect;
    // typing each one would only repeat the assertion. Non-null assertions state what the
    // test has just checked.
    files: ['test/**/*.ts', 'src/**/*.test.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
  },
  {
    // The password reset page's script runs in the browser.
    files: ['src/**/reset-page/*.js'],
    languageOptions: {
      sourceType: 'script',
      globals: {
        window: 'readonly',
        document: 'readonly',
        fetch: 'readonly',
        URL: 'readonly',
        URLSearchParams: 'readonly',
      },
    },
  },
  boundaries,
);
