#!/usr/bin/env node
// Run by `npm run build` after Vite: the web console's JavaScript stays under its budget
// (250 KB gzipped, all files together) and loads nothing from another origin (Postern runs
// offline: no CDN, no remote font). Fails the build otherwise.
import { readdirSync, readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

export const JS_BUDGET_GZIP_BYTES = 250 * 1024;
// The built app, or another directory given as the first argument (the test's oversized one).
const dir = process.argv[2] ? new URL(`file://${process.argv[2].replace(/\/?$/, '/')}`) : new URL('../dist/web/', import.meta.url);

export function webBundleFigures() {
  const assets = readdirSync(new URL('assets/', dir));
  const js = assets.filter((f) => f.endsWith('.js'));
  const gzipBytes = js.reduce((sum, f) => sum + gzipSync(readFileSync(new URL(`assets/${f}`, dir)), { level: 9 }).length, 0);
  const remote = [];
  for (const f of ['index.html', ...assets.filter((a) => a.endsWith('.css')).map((a) => `assets/${a}`)]) {
    const text = readFileSync(new URL(f, dir), 'utf8');
    // Any src/href/url() to another origin.
    for (const m of text.matchAll(/(?:src|href)=["']?(?:https?:)?\/\/[^"'\s>]+|url\(\s*["']?(?:https?:)?\/\/[^)]+\)|@import\s+["']?(?:https?:)?\/\//g)) remote.push(`${f}: ${m[0]}`);
  }
  return { files: js, gzipBytes, remote };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { files, gzipBytes, remote } = webBundleFigures();
  const kb = (gzipBytes / 1024).toFixed(1);
  if (files.length === 0) {
    console.error('web console: no JavaScript in dist/web/assets (did vite build run?)');
    process.exit(1);
  }
  if (gzipBytes > JS_BUDGET_GZIP_BYTES) {
    console.error(`web console: JavaScript is ${kb} KB gzipped, over the 250 KB budget`);
    process.exit(1);
  }
  if (remote.length > 0) {
    console.error(`web console: loads from another origin:\n  ${remote.join('\n  ')}`);
    process.exit(1);
  }
  if (process.env.npm_config_loglevel !== 'silent') console.log(`web console: ${files.length} JavaScript file(s), ${kb} KB gzipped (budget 250 KB)`);
}
