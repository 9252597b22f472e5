import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
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
    const writers = new SpoolWriters(spool, 2, 0, silentLogger());
    try {
      const message = toOutgoingMessage({
        from: 'Sender <sender@example.com>',
        to: 'rcpt@example.org',
        subject: 'Hello',
        text: 'Hello there',
      });
      const now = Date.UTC(2026, 10, 24);
      assert.equal(writers.threads, 1);
      // One task at a time never spills: the second thread is not started.
      for (let i = 0; i < 5; i++) await writers.write(`m.single${i}`, message, now);
      assert.equal(writers.threads, 1);
      // Twenty in one tick: the first thread takes 4, and the spill starts a second (the tasks
      // stay with the first until it has loaded).
      const written = await Promise.all(
        Array.from({ length: 20 }, (_, i) => writers.write(`m.burst${i}`, message, now)),
      );
      assert.equal(writers.threads, 2);
      for (const [i, file] of written.entries()) {
        assert.ok('tmpPath' in file, 'held at a limit of 0');
        const mime = readFileSync(file.tmpPath, 'latin1');
        assert.equal(file.size, Buffer.byteLength(mime, 'latin1'));
        assert.match(mime, new RegExp(`^Message-ID: <m\\.burst${i}@example\\.com>\\r$`, 'm'));
      }
      // Never more than the configured number.
      await Promise.all(
        Array.from({ length: 40 }, (_, i) => writers.write(`m.more${i}`, message, now)),
      );
      assert.equal(writers.threads, 2);
    } finally {
      await writers.close();
    }
  });

  it('hand a message up to the held limit back whole, with no file, and write a larger one to its temp file', async () => {
    const dir = stateDir();
    const spool = new Spool(dir);
    const writers = new SpoolWriters(spool, 1, 4096, silentLogger());
    try {
      const now = Date.UTC(2026, 10, 24);
      const small = await writers.write(
        'm.small',
        toOutgoingMessage({
          from: 'sender@example.com',
          to: 'rcpt@example.org',
          subject: 'Small',
          text: 'Hello there',
        }),
        now,
      );
      assert.ok('held' in small, 'a small message is held');
      const mime = Buffer.from(small.held).toString('latin1');
      assert.equal(small.size, small.held.byteLength);
      assert.match(mime, /^Message-ID: <m\.small@example\.com>\r$/m);
      assert.match(mime, /\r\n\r\nHello there/);
      assert.deepEqual(
        readdirSync(path.join(dir, 'spool', 'tmp')),
        [],
        'no temp file for a held message',
      );

      const large = await writers.write(
        'm.large',
        toOutgoingMessage({
          from: 'sender@example.com',
          to: 'rcpt@example.org',
          subject: 'Large',
          text: 'x'.repeat(8000),
        }),
        now,
      );
      assert.ok('tmpPath' in large, 'a message over the limit is a file');
      assert.equal(statSync(large.tmpPath).size, large.size);
      assert.ok(large.size > 4096);

      const received = Buffer.from(
        'From: sender@example.com\r\nTo: rcpt@example.org\r\nSubject: Received\r\n\r\nHi\r\n',
      );
      const tmpPath = path.join(dir, 'spool', 'tmp', 'received.tmp');
      const ingested = await writers.ingest(received, tmpPath, {
        id: 'm.received',
        defaultSender: 'sender@example.com',
      });
      assert.ok(ingested.held, 'a small received message is held');
      assert.equal(ingested.parsed.size, ingested.held.byteLength);
      assert.match(
        Buffer.from(ingested.held).toString('latin1'),
        /^Message-ID: <m\.received@example\.com>\r$/m,
      );
      assert.equal(existsSync(tmpPath), false);
    } finally {
      await writers.close();
    }
  });
});
