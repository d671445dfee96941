// Every relative link of the README and the docs resolves, as a forge renders them: a path
// relative to the file that holds the link, to a file of the repository, and an anchor to a
// heading of the file it names (GitHub's slugs). A link that works only from the repository's
// root, or to a heading since renamed, fails here.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { engine } from '../support/test-app.js';

const root = join(import.meta.dirname, '..', '..');
const documents = [
  'README.md',
  'clients/typescript/README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens; repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const text = markdown.replace(/^```[\s\S]*?^```/gm, '');
  for (const [, heading] of text.matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const slug = (heading ?? '')
      .replace(/`/g, '')
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** The relative links of a Markdown text (inline form), outside code blocks and code spans. */
function linksOf(markdown: string): string[] {
  const text = markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)(?: "[^"]*")?\)/g)]
    .map((m) => m[1] ?? '')
    .filter((target) => !/^[a-z][a-z+.-]*:/i.test(target));
}

describe.runIf(engine === 'pglite')('relative links in the README and the docs', () => {
  it.each(documents)('%s: every one resolves', (document) => {
    const markdown = readFileSync(join(root, document), 'utf8');
    const broken: string[] = [];
    for (const link of linksOf(markdown)) {
      const [path = '', anchor] = link.split('#');
      const target = path === '' ? join(root, document) : join(root, dirname(document), decodeURI(path));
      if (!relative(root, target).startsWith('..') && existsSync(target)) {
        if (anchor !== undefined && target.endsWith('.md') && !anchorsOf(readFileSync(target, 'utf8')).has(anchor))
          broken.push(`${link} (no such heading)`);
      } else broken.push(`${link} (no such file)`);
    }
    expect(broken).toEqual([]);
  });
});
