import { fileURLToPath } from 'node:url';

/** The checkout's root (this file runs as dist/test/support/paths.js). */
export const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
