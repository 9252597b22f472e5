import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { tempDirs } from '../support/hooks.js';
import { runCli } from '../support/postern.js';

const freshDir = tempDirs('postern-cli-loading-');

// Records every file module the CLI process resolves (a module hook, in its own thread).
const hooks = `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  if (r.url.startsWith('file:')) appendFileSync(process.env.LOADED_MODULES_FILE, r.url + '\\n');
  return r;
}`;
const preload = `import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)});`;

async function loadedBy(args: string[]): Promise<{ code: number; modules: string[] }> {
  const dir = freshDir();
  const file = path.join(dir, 'loaded.txt');
  const result = await runCli(args, {
    POSTERN_STATE_DIR: dir,
    LOADED_MODULES_FILE: file,
    NODE_OPTIONS: `--import=data:text/javascript,${encodeURIComponent(preload)}`,
  });
  const modules = readFileSync(file, 'utf8')
    .split('\n')
    .filter((u) => u.includes('/dist/src/'))
    .map((u) => u.slice(u.indexOf('/dist/src/') + '/dist/src/'.length));
  return { code: result.code, modules };
}

describe('what a CLI command loads', () => {
  test("a command loads its own group, not the server's modules or the other groups", async () => {
    const { code, modules } = await loadedBy(['project', 'list']);
    assert.equal(code, 0);
    assert.ok(modules.includes('cli/project.js'), modules.join(' '));
    for (const other of [
      'main.js',
      'cli/start.js',
      'smtp/server.js',
      'console/server.js',
      'cli/key.js',
      'cli/domain.js',
    ]) {
      assert.ok(!modules.includes(other), `project list loaded ${other}`);
    }
  });

  test('a start refused for its config does not load the server', async () => {
    const { code, modules } = await loadedBy(['start', '--config', '/nonexistent/postern.json']);
    assert.equal(code, 78);
    assert.ok(modules.includes('cli/start.js'));
    assert.ok(
      !modules.includes('main.js') && !modules.includes('smtp/server.js'),
      modules.join(' '),
    );
  });

  test('help lists every group (it loads them all) and still not the server', async () => {
    const { code, modules } = await loadedBy(['--help']);
    assert.equal(code, 0);
    for (const group of ['cli/key.js', 'cli/domain.js', 'cli/backup.js'])
      assert.ok(modules.includes(group), group);
    assert.ok(!modules.includes('main.js') && !modules.includes('cli/start.js'));
  });
});
