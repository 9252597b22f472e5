import { readFileSync } from 'node:fs';

let cached: string | null = null;

/** Postern's version, package.json's (read once; dist/src/platform/ is three levels below the package). */
export function posternVersion(): string {
  cached ??= (
    JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    }
  ).version;
  return cached;
}
