// Only src/store knows which backend it runs on: no file outside it reads `dialect` (the store's
// seams answer instead: src/store/backend.ts). .dependency-cruiser.cjs keeps store/postgres/
// imports inside src/store; this keeps the word too, which no import rule can see.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');

function* sources(dir) {
  for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const rel = `${dir}/${entry.name}`;
    if (entry.isDirectory()) {
      if (rel !== 'src/store') yield* sources(rel);
    } else if (/\.tsx?$/.test(entry.name)) {
      yield rel;
    }
  }
}

const found = [];
for (const file of sources('src')) {
  readFileSync(path.join(root, file), 'utf8')
    .split('\n')
    .forEach((line, i) => {
      if (/\bdialect\b/.test(line)) found.push(`${file}:${i + 1}: ${line.trim()}`);
    });
}
if (found.length > 0) {
  console.error(`\`dialect\` read outside src/store (ask the store's seams instead: src/store/backend.ts):\n${found.join('\n')}`);
  process.exit(1);
}
