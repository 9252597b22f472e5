import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { publishSpoolFiles } from '../../src/spool/publish.js';
import { loadSyncFilesystem } from '../../src/spool/syncFilesystem.js';
import { tempDirs } from '../support/hooks.js';

const spoolDir = tempDirs('postern-spool-');

/** A spool-like tree: tmp/ holding `count` written temp files, and where each should end up. */
function pendingFiles(count: number): {
  root: string;
  files: { tmpPath: string; finalPath: string; body: string }[];
} {
  const root = spoolDir();
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
  it('the syncfs addon is built and loads on Linux (else every group pays an fsync per file)', {
    skip: process.platform !== 'linux',
  }, () => {
    const syncfs = loadSyncFilesystem();
    assert.equal(typeof syncfs, 'function');
    syncfs!(process.cwd());
    assert.throws(() => syncfs!('/nonexistent/postern'), /ENOENT|No such file/);
  });

  for (const mode of ['syncfs', 'fsync'] as const) {
    it(`${mode}: a group of temp files ends under its final names, byte for byte, with no temp left`, {
      skip: mode === 'syncfs' && process.platform !== 'linux',
    }, () => {
      const { root, files } = pendingFiles(20);
      const errors = publishSpoolFiles(files, mode === 'syncfs' ? loadSyncFilesystem() : null);
      assert.deepEqual(
        errors,
        files.map(() => null),
      );
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
    assert.deepEqual(
      errors.map((e) => e?.message),
      ['syncfs: Input/output error', 'syncfs: Input/output error'],
    );
  });
});
