#!/usr/bin/env node
// The operator CLI. Compiled output lives in dist/ (npm run build).
// Durable writes are fsync-bound and run on libuv's thread pool: more threads let the
// filesystem journal batch concurrent fsyncs. Set before anything touches the pool.
process.env.UV_THREADPOOL_SIZE ??= '16';
// The state directory holds secrets: nothing Postern creates is readable by group or others,
// whatever the caller's umask (each file and directory is also created with an explicit mode).
process.umask(0o077);
const { runCli } = await import('../dist/src/cli/main.js');

process.exitCode = await runCli(process.argv.slice(2));
