// The web console: built into dist/web by `npm run build` (and so by `npm ci`), served by the
// console listener at `/`. Everything is bundled: no CDN, no remote font (Postern runs offline).
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  // Relative asset URLs: the console works behind a proxy's path prefix too.
  base: './',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: fileURLToPath(new URL('../dist/web', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    // No inline scripts anywhere: the console's CSP allows only its own files.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    reportCompressedSize: false,
  },
});
