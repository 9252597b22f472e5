import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '../support/paths.js';

// The README is the entrance and docs/ the manual: every link between them, to a file of the
// repository or to a heading, must lead somewhere (GitHub's anchors: lower case, punctuation
// dropped, spaces to hyphens, a repeated heading numbered).

function markdownFiles(): string[] {
  const docs = readdirSync(path.join(repoRoot, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`);
  return ['README.md', ...docs];
}

/** Lines outside fenced code blocks. */
function outsideFences(text: string): string[] {
  let fenced = false;
  const lines: string[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    else if (!fenced) lines.push(line);
  }
  return lines;
}

/** Lines outside fenced code blocks, with inline code spans blanked (a link there is an example). */
function prose(text: string): string[] {
  return outsideFences(text).map((line) => line.replace(/`[^`]*`/g, '``'));
}

export function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of outsideFences(text)) {
    const heading = /^#{1,6} +(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = heading[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{N}_\- ]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of text.matchAll(/<a (?:id|name)="([^"]+)"/g)) anchors.add(m[1]);
  return anchors;
}

test('README is at most 400 lines: the entrance, with the manual in docs/', () => {
  const lines = readFileSync(path.join(repoRoot, 'README.md'), 'utf8').split('\n').length;
  assert.ok(lines <= 400, `README.md has ${lines} lines`);
});

test('every link in README.md and docs/ leads to a file of the repository and, with an anchor, to a heading there', () => {
  const dead: string[] = [];
  let checked = 0;
  for (const file of markdownFiles()) {
    const text = readFileSync(path.join(repoRoot, file), 'utf8');
    prose(text).forEach((line) => {
      for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1];
        if (/^[a-z]+:/i.test(target)) continue;
        checked++;
        const [linkPath, anchor] = target.split('#');
        const resolved =
          linkPath === '' ? file : path.normalize(path.join(path.dirname(file), linkPath));
        const absolute = path.join(repoRoot, resolved);
        if (!existsSync(absolute)) {
          dead.push(`${file}: ${target} (no file ${resolved})`);
          continue;
        }
        if (
          anchor === undefined ||
          anchor === '' ||
          !statSync(absolute).isFile() ||
          !resolved.endsWith('.md')
        )
          continue;
        if (!anchorsOf(readFileSync(absolute, 'utf8')).has(anchor))
          dead.push(`${file}: ${target} (no heading #${anchor} in ${resolved})`);
      }
    });
  }
  assert.ok(checked > 20, `only ${checked} links found: the reader is broken`);
  assert.deepEqual(dead, []);
});

test('every page in docs/ is reachable from the README', () => {
  const readme = readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
  const linked = new Set([...readme.matchAll(/\]\((docs\/[^)#\s]+)/g)].map((m) => m[1]));
  const pages = markdownFiles().filter((f) => f.startsWith('docs/'));
  assert.deepEqual(
    pages.filter((p) => !linked.has(p)),
    [],
  );
});

test('the anchor reader follows GitHub: punctuation dropped, code kept as text, repeats numbered', () => {
  const anchors = anchorsOf(
    '# A\n## The `tls.acme` key: how?\n## Metrics\n### Metrics\n```\n## not a heading\n```\n',
  );
  assert.deepEqual([...anchors], ['a', 'the-tlsacme-key-how', 'metrics', 'metrics-1']);
});
