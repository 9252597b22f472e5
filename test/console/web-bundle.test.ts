/**
 * The built web console stays small and offline: its JavaScript under 250 KB gzipped, nothing
 * loaded from another origin. The build runs the same check (scripts/check-web-bundle.mjs);
 * here it is run on the built app, and shown to refuse an app over budget or with a CDN link.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { repoRoot } from '../support/postern.js';

const script = path.join(repoRoot, 'scripts', 'check-web-bundle.mjs');
// Without npm's log level: under `npm run … --silent` (test:postgres) the script prints no figures.
const { npm_config_loglevel: _silenced, ...env } = process.env;
const check = (dir?: string) =>
  spawnSync(process.execPath, [script, ...(dir ? [dir] : [])], { encoding: 'utf8', env });
const temp = mkdtempSync(path.join(tmpdir(), 'postern-web-'));
after(() => rmSync(temp, { recursive: true, force: true }));

function fakeApp(
  name: string,
  js: string | Buffer,
  html = '<script type="module" src="./assets/app.js"></script>',
): string {
  const dir = path.join(temp, name);
  mkdirSync(path.join(dir, 'assets'), { recursive: true });
  writeFileSync(path.join(dir, 'index.html'), html);
  writeFileSync(path.join(dir, 'assets', 'app.js'), js);
  return dir;
}

describe('web console bundle', () => {
  test("the built app's JavaScript is under 250 KB gzipped and loads nothing from another origin", () => {
    const r = check();
    assert.equal(r.status, 0, r.stderr);
    const kb = Number(/([\d.]+) KB gzipped/.exec(r.stdout)?.[1]);
    assert.ok(kb > 0 && kb < 250, r.stdout);
  });

  test('the check refuses JavaScript over the budget, and a page that loads from a CDN', () => {
    // Random bytes do not compress: 300 KB stays 300 KB gzipped.
    const big = check(fakeApp('big', randomBytes(300 * 1024).toString('base64')));
    assert.equal(big.status, 1);
    assert.match(big.stderr, /over the 250 KB budget/);
    const cdn = check(
      fakeApp(
        'cdn',
        'export {}',
        '<link rel="stylesheet" href="https://cdn.example.com/font.css"><script type="module" src="./assets/app.js"></script>',
      ),
    );
    assert.equal(cdn.status, 1);
    assert.match(cdn.stderr, /another origin:.*cdn\.example\.com/s);
  });
});
