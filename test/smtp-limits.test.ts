/** What one SMTP client may cost the server: disk at SIZE. */
import assert from 'node:assert/strict';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createProjectWithKeys, startTestPostern, type TestPostern } from './support/postern.js';
import { authedSession, rawMessage, rawSend } from './support/rawSmtp.js';
import { settle } from './support/waiting.js';

const QUEUED = /^250 2\.0\.0 OK queued as (m\.[0-9a-z]{26})$/;
const KiB = 1024;

const countMessages = (p: TestPostern, projectId: string) => p.ctx.db.prepare('SELECT COUNT(*) FROM messages WHERE project_id = ?').pluck().get(projectId) as number;

/** Bytes in the spool's temp directory right now (files may vanish while they are counted). */
function spoolTmpBytes(p: TestPostern): number {
  const dir = path.join(p.stateDir, 'spool', 'tmp');
  let total = 0;
  for (const name of readdirSync(dir)) {
    try {
      total += statSync(path.join(dir, name)).size;
    } catch {
      // removed in between
    }
  }
  return total;
}

describe('SMTP DATA over SIZE (smtp.max_message_bytes)', () => {
  const LIMIT = 64 * KiB;
  let p: TestPostern;
  before(async () => {
    p = await startTestPostern({ smtp: true, config: { smtp: { max_message_bytes: LIMIT } } });
  });
  after(async () => p.close());

  test('stops being written at the limit: spool/tmp never holds more than SIZE while the rest of 4 MB is drained, then 552 5.3.4; nothing is kept and the session goes on', async () => {
    const { project, liveKey } = createProjectWithKeys(p.ctx, 'over size');
    const client = await authedSession(p.smtp.production.starttls, liveKey);
    let largest = 0;
    const watch = setInterval(() => (largest = Math.max(largest, spoolTmpBytes(p))), 2);
    try {
      // No SIZE declared at MAIL FROM: only the bytes tell.
      assert.match(await client.command('MAIL FROM:<sender@example.com>'), /^250 /);
      assert.match(await client.command('RCPT TO:<rcpt@example.org>'), /^250 /);
      assert.match(await client.command('DATA'), /^354 /);
      await client.writeAll('From: sender@example.com\r\nTo: rcpt@example.org\r\nSubject: too big\r\n\r\n');
      const line = `${'x'.repeat(78)}\r\n`;
      for (let sent = 0; sent < 4 * 1024 * KiB; sent += 64 * KiB) await client.writeAll(line.repeat((64 * KiB) / line.length));
      // Everything but the final dot is out: the server has had time to read and (not) store it.
      await settle(300);
      largest = Math.max(largest, spoolTmpBytes(p));
      client.write('.\r\n');
      assert.match(await client.next(), /^552 5\.3\.4 /);
      clearInterval(watch);
      // The rewritten header block may add a Message-ID to what was received.
      assert.ok(largest <= LIMIT + 1 * KiB, `spool/tmp held at most ${largest} bytes (SIZE ${LIMIT})`);
      assert.match(await rawSend(client, 'sender@example.com', ['rcpt@example.org'], rawMessage()), QUEUED);
    } finally {
      clearInterval(watch);
      await client.quit();
    }
    assert.equal(countMessages(p, project.id), 1);
    assert.equal(spoolTmpBytes(p), 0, 'no temp file left behind');
  });
});
