import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { toOutgoingMessage } from '../../src/accept/outgoingMessage.js';
import { SpoolWriters } from '../../src/accept/writers.js';
import { silentLogger } from '../../src/log.js';
import { Spool } from '../../src/spool/spool.js';
import { tempDirs } from '../support/hooks.js';

const stateDir = tempDirs('postern-writers-');

describe('spool writer threads', () => {
  it('start with one thread and add the next only when the load first spills onto it; every task is written', async () => {
    const spool = new Spool(stateDir());
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
