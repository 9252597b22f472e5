// Builds native/build/Release/linux.node at install time, on Linux: syncfs(2) for group-durable
// spool writes, and SCHED_IDLE for the webhook thread.
// Elsewhere, or if no C toolchain is present, Postern falls back to one fsync per spool file
// (correct, only slower; `postern start` logs which of the two it uses) and to nice 19 for the
// webhook thread.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const native = fileURLToPath(new URL('../native/', import.meta.url));
if (process.platform !== 'linux') {
  console.log(`native addon skipped on ${process.platform}: spool files are fsynced one by one`);
  process.exit(0);
}
// npm runs install scripts with its bundled node-gyp on PATH and names it in npm_config_node_gyp.
const gyp = process.env.npm_config_node_gyp;
const [cmd, args] = gyp ? [process.execPath, [gyp]] : ['node-gyp', []];
const result = spawnSync(cmd, [...args, 'rebuild', `--directory=${native}`], { stdio: 'inherit' });
if (result.status !== 0) {
  console.warn('native addon did not build: spool files will be fsynced one by one (slower, equally durable); the webhook thread runs at nice 19 instead of SCHED_IDLE');
}
