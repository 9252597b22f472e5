import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { toOutgoingMessage } from '../src/accept/outgoingMessage.js';
import { silentLogger } from '../src/log.js';
import { publishSpoolFiles } from '../src/spool/publish.js';
import { Spool } from '../src/spool/spool.js';
import { SpoolWriters } from '../src/accept/writers.js';
import { loadSyncFilesystem } from '../src/spool/syncFilesystem.js';
import { tempStateDir } from './support/postern.js';

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A spool-like tree: tmp/ holding `count` written temp files, and where each should end up. */
function pendingFiles(count: number): { root: string; files: { tmpPath: string; finalPath: string; body: string }[] } {
  const root = tempStateDir('postern-spool-');
  dirs.push(root);
  mkdirSync(path.join(root, 'tmp'));
  const files = Array.from({ length: count }, (_, i) => {
    const tmpPath = path.join(root, 'tmp', `m.${i}.eml.1.tmp`);
    const body = `Subject: ${i}\r\n\r\nbody ${i}\r\n`;
    writeFileSync(tmpPath, body);
    return { tmpPath, finalPath: path.join(root, '2026-11-23', `m.${i}.eml`), body };
  });
  return { root, files };
}

describe('spool publishing', () => {
  it('the syncfs addon is built and loads on Linux (else every group pays an fsync per file)', { skip: process.platform !== 'linux' }, () => {
    const syncfs = loadSyncFilesystem();
    assert.equal(typeof syncfs, 'function');
    syncfs!(process.cwd());
    assert.throws(() => syncfs!('/nonexistent/postern'), /ENOENT|No such file/);
  });

  for (const mode of ['syncfs', 'fsync'] as const) {
    it(`${mode}: a group of temp files ends under its final names, byte for byte, with no temp left`, { skip: mode === 'syncfs' && process.platform !== 'linux' }, () => {
      const { root, files } = pendingFiles(20);
      const errors = publishSpoolFiles(files, mode === 'syncfs' ? loadSyncFilesystem() : null);
      assert.deepEqual(errors, files.map(() => null));
      for (const f of files) assert.equal(readFileSync(f.finalPath, 'utf8'), f.body);
      assert.deepEqual(readdirSync(path.join(root, 'tmp')), []);
    });
  }

  it('a file that cannot be published fails alone; the rest of its group is published', () => {
    const { files } = pendingFiles(3);
    rmSync(files[1].tmpPath); // vanished before its rename
    const errors = publishSpoolFiles(files, loadSyncFilesystem());
    assert.equal(errors[0], null);
    assert.match(String(errors[1]?.message), /ENOENT/);
    assert.equal(errors[2], null);
    assert.ok(existsSync(files[0].finalPath) && existsSync(files[2].finalPath));
    assert.ok(!existsSync(files[1].finalPath));
  });

  it('a group is renamed into place and then flushed once; if that flush fails every file of the group is refused', () => {
    const { files } = pendingFiles(2);
    let renamedBeforeFlush = false;
    const failing = () => {
      renamedBeforeFlush = files.every((f) => existsSync(f.finalPath) && !existsSync(f.tmpPath));
      throw new Error('syncfs: Input/output error');
    };
    const errors = publishSpoolFiles(files, failing);
    assert.equal(renamedBeforeFlush, true);
    // Refused units have no index row; the door removes their files (Spool.removeUnpublished).
    assert.deepEqual(errors.map((e) => e?.message), ['syncfs: Input/output error', 'syncfs: Input/output error']);
  });
});

describe('spool writer threads', () => {
  it('start with one thread and add the next only when the load first spills onto it; every task is written', async () => {
    const root = tempStateDir('postern-writers-');
    dirs.push(root);
    const spool = new Spool(root);
    const writers = new SpoolWriters(spool, 2, silentLogger());
    try {
      const message = toOutgoingMessage({ from: 'Sender <sender@example.com>', to: 'rcpt@example.org', subject: 'Hello', text: 'Hello there' });
      const now = Date.UTC(2026, 10, 24);
      assert.equal(writers.threads, 1);
      // One task at a time never spills: the second thread is not started.
      for (let i = 0; i < 5; i++) await writers.write(`m.single${i}`, message, now);
      assert.equal(writers.threads, 1);
      // Twenty in one tick: the first thread takes 4, the rest spill to a second, started now.
      const written = await Promise.all(Array.from({ length: 20 }, (_, i) => writers.write(`m.burst${i}`, message, now)));
      assert.equal(writers.threads, 2);
      for (const [i, file] of written.entries()) {
        const mime = readFileSync(file.tmpPath, 'latin1');
        assert.equal(file.size, Buffer.byteLength(mime, 'latin1'));
        assert.match(mime, new RegExp(`^Message-ID: <m\\.burst${i}@example\\.com>\\r$`, 'm'));
      }
      // Never more than the configured number.
      await Promise.all(Array.from({ length: 40 }, (_, i) => writers.write(`m.more${i}`, message, now)));
      assert.equal(writers.threads, 2);
    } finally {
      await writers.close();
    }
  });
});
