/**
 * What one SMTP client may cost the server before and outside a message: disk at SIZE, commands
 * and line lengths before AUTH, failed AUTH attempts (malformed ones included), the time a
 * session may stay unauthenticated, and the per-IP window for keyless requests (which must
 * never hold a valid key).
 */
import assert from 'node:assert/strict';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { getValue } from '../../src/store/queries.js';
import {
  createProjectWithKeys,
  post,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import {
  authedSession,
  plain,
  RawSmtp,
  rawMessage,
  rawSend,
  tlsSession,
} from '../support/rawSmtp.js';
import { settle } from '../support/waiting.js';

const QUEUED = /^250 2\.0\.0 OK queued as (m\.[0-9a-z]{26})$/;
const KiB = 1024;

const countMessages = (p: TestPostern, projectId: string) =>
  getValue<number>(p.ctx.store, 'SELECT COUNT(*) FROM messages WHERE project_id = ?', projectId);

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

/** Sends commands one by one and returns each reply, stopping at the first that is not 2xx/3xx. */
async function commandsUntilRefused(client: RawSmtp, lines: string[]): Promise<string[]> {
  const replies: string[] = [];
  for (const line of lines) {
    const reply = await client.command(line);
    replies.push(reply);
    if (!/^[23]/.test(reply)) break;
  }
  return replies;
}

describe('SMTP DATA over SIZE (smtp.max_message_bytes)', () => {
  const LIMIT = 64 * KiB;
  let p: TestPostern;
  before(async () => {
    p = await startTestPostern({ smtp: true, config: { smtp: { max_message_bytes: LIMIT } } });
  });
  after(async () => p.close());

  test('stops being written at the limit: spool/tmp never holds more than SIZE while the rest of 4 MB is drained, then 552 5.3.4; nothing is kept and the session goes on', async () => {
    const { project, liveKey } = await createProjectWithKeys(p.ctx, 'over size');
    const client = await authedSession(p.smtp.production.starttls, liveKey);
    let largest = 0;
    const watch = setInterval(() => (largest = Math.max(largest, spoolTmpBytes(p))), 2);
    try {
      // No SIZE declared at MAIL FROM: only the bytes tell.
      assert.match(await client.command('MAIL FROM:<sender@example.com>'), /^250 /);
      assert.match(await client.command('RCPT TO:<rcpt@example.org>'), /^250 /);
      assert.match(await client.command('DATA'), /^354 /);
      await client.writeAll(
        'From: sender@example.com\r\nTo: rcpt@example.org\r\nSubject: too big\r\n\r\n',
      );
      const line = `${'x'.repeat(78)}\r\n`;
      for (let sent = 0; sent < 4 * 1024 * KiB; sent += 64 * KiB)
        await client.writeAll(line.repeat((64 * KiB) / line.length));
      // Everything but the final dot is out: the server has had time to read and (not) store it.
      await settle(300);
      largest = Math.max(largest, spoolTmpBytes(p));
      client.write('.\r\n');
      assert.match(await client.next(), /^552 5\.3\.4 /);
      clearInterval(watch);
      // The rewritten header block may add a Message-ID to what was received.
      assert.ok(
        largest <= LIMIT + 1 * KiB,
        `spool/tmp held at most ${largest} bytes (SIZE ${LIMIT})`,
      );
      assert.match(
        await rawSend(client, 'sender@example.com', ['rcpt@example.org'], rawMessage()),
        QUEUED,
      );
    } finally {
      clearInterval(watch);
      await client.quit();
    }
    assert.equal(await countMessages(p, project.id), 1);
    assert.equal(spoolTmpBytes(p), 0, 'no temp file left behind');
  });
});

describe('SMTP before AUTH: commands and command lines are bounded', () => {
  let p: TestPostern;
  before(async () => {
    p = await startTestPostern({ smtp: true });
  });
  after(async () => p.close());

  test('on a plaintext session the 10th command without AUTH is answered 421 and the connection closed (smtp.max_unauthenticated_commands)', async () => {
    const { client, greeting } = await RawSmtp.connect(p.smtp.production.starttls);
    try {
      assert.match(greeting, /^220 /);
      const replies = await commandsUntilRefused(client, [
        'EHLO client.test',
        ...Array.from({ length: 20 }, () => 'NOOP'),
      ]);
      assert.equal(replies.length, 10, replies.join(' | '));
      assert.ok(
        replies.slice(0, 9).every((r) => r.startsWith('250')),
        replies.join(' | '),
      );
      assert.match(replies[9], /^421 4\.4\.2 Error: too many unauthenticated commands$/);
      await client.closed;
    } finally {
      client.destroy();
    }
  });

  test('commands before and after STARTTLS share one budget; AUTH is not counted, and once authenticated nothing is', async () => {
    const { liveKey } = await createProjectWithKeys(p.ctx, 'budget');
    const spent = await RawSmtp.connect(p.smtp.production.starttls);
    try {
      assert.deepEqual(
        (
          await commandsUntilRefused(spent.client, ['EHLO client.test', 'NOOP', 'NOOP', 'NOOP'])
        ).map((r) => r.slice(0, 3)),
        ['250', '250', '250', '250'],
      );
      await spent.client.startTls(); // the 5th
      const replies = await commandsUntilRefused(spent.client, [
        'EHLO client.test',
        'NOOP',
        'NOOP',
        'NOOP',
        'NOOP',
        'NOOP',
      ]);
      assert.deepEqual(
        replies.map((r) => r.slice(0, 3)),
        ['250', '250', '250', '250', '421'],
      );
      await spent.client.closed;
    } finally {
      spent.client.destroy();
    }
    const client = await authedSession(p.smtp.production.starttls, liveKey);
    try {
      for (let i = 0; i < 20; i++) assert.match(await client.command('NOOP'), /^250 /);
      assert.match(
        await rawSend(client, 'sender@example.com', ['rcpt@example.org'], rawMessage()),
        QUEUED,
      );
    } finally {
      await client.quit();
    }
  });

  test('a command line over smtp.max_command_line_bytes (2048) is answered 500 5.5.2 Line too long and the connection closed; one of 2048 octets is read', async () => {
    const { client } = await RawSmtp.connect(p.smtp.production.starttls);
    try {
      assert.match(await client.command(`NOOP ${'x'.repeat(2048 - 5)}`), /^250 /);
      assert.equal(await client.command(`NOOP ${'x'.repeat(10_000)}`), '500 5.5.2 Line too long');
      await client.closed;
    } finally {
      client.destroy();
    }
  });

  test('a line that never ends is cut off the same way once it passes the limit, in plaintext and after AUTH alike', async () => {
    const { liveKey } = await createProjectWithKeys(p.ctx, 'long lines');
    const plaintext = await RawSmtp.connect(p.smtp.production.starttls);
    const authed = await authedSession(p.smtp.production.starttls, liveKey);
    try {
      for (const client of [plaintext.client, authed]) {
        client.write(`MAIL FROM:<${'a'.repeat(3000)}`);
        assert.equal(await client.next(), '500 5.5.2 Line too long');
        await client.closed;
      }
    } finally {
      plaintext.client.destroy();
      authed.destroy();
    }
  });
});

describe('SMTP AUTH lines smtp-server refuses before asking for a key count as failed attempts (smtp.auth_failures_before_disconnect, 5)', () => {
  const CLOSED = '421 4.4.2 Too many failed authentication attempts';
  let p: TestPostern;
  before(async () => {
    p = await startTestPostern({ smtp: true });
  });
  after(async () => p.close());

  /** The next `n` replies (a pipelined loop's). */
  async function replies(client: RawSmtp, n: number): Promise<string[]> {
    const out: string[] = [];
    for (let i = 0; i < n; i++) out.push(await client.next());
    return out;
  }

  for (const [line, refused] of [
    ['AUTH FOO', /^504 5\.5\.4 Error: Unrecognized authentication type$/],
    ['AUTH PLAIN !!!', /^501 5\.5\.4 Error: invalid userdata$/],
  ] as const) {
    test(`after STARTTLS, "${line}" sent in a loop is answered 5 times, then ${CLOSED} and the connection closed`, async () => {
      const client = await tlsSession(p.smtp.production.starttls);
      try {
        client.write(`${line}\r\n`.repeat(1000));
        const answers = await replies(client, 6);
        assert.ok(
          answers.slice(0, 5).every((r) => refused.test(r)),
          answers.join(' | '),
        );
        assert.equal(answers[5], CLOSED, answers.join(' | '));
        await client.closed;
      } finally {
        client.destroy();
      }
    });
  }

  test('the same loop on the implicit-TLS port is closed after 5 too', async () => {
    const client = await tlsSession(p.smtp.production.implicit, true);
    try {
      client.write('AUTH FOO\r\n'.repeat(1000));
      assert.equal((await replies(client, 6))[5], CLOSED);
      await client.closed;
    } finally {
      client.destroy();
    }
  });

  test('a bad key and every kind of malformed AUTH share the one count: the 5th failure closes the session', async () => {
    const client = await tlsSession(p.smtp.production.starttls);
    try {
      assert.match(
        await client.command(`AUTH PLAIN ${plain(`ps_live_${'B'.repeat(40)}`)}`),
        /^535 5\.7\.8 invalid_api_key: /,
      );
      assert.match(await client.command('AUTH'), /^504 /, 'no mechanism');
      assert.match(await client.command('AUTH LOGIN'), /^334 /);
      assert.match(
        await client.command('*'),
        /^501 .*Authentication aborted$/,
        'an aborted exchange',
      );
      assert.match(await client.command('AUTH PLAIN a b'), /^501 /, 'bad syntax');
      assert.match(
        await client.command(`AUTH PLAIN ${Buffer.from('no fields').toString('base64')}`),
        /^501 .*invalid userdata$/,
        'a token without its three fields',
      );
      assert.equal(await client.next(), CLOSED);
      await client.closed;
    } finally {
      client.destroy();
    }
  });

  test('AUTH after STARTTLS but before the new EHLO (503) is counted too', async () => {
    const { client } = await RawSmtp.connect(p.smtp.production.starttls);
    try {
      assert.match(await client.command('EHLO client.test'), /^250/);
      await client.startTls();
      client.write(`AUTH PLAIN ${plain('whatever')}\r\n`.repeat(100));
      const answers = await replies(client, 6);
      assert.ok(
        answers.slice(0, 5).every((r) => r.startsWith('503 ')),
        answers.join(' | '),
      );
      assert.equal(answers[5], CLOSED);
      await client.closed;
    } finally {
      client.destroy();
    }
  });

  test('four malformed attempts, then the right key: authenticated, and the message accepted', async () => {
    const { project, liveKey } = await createProjectWithKeys(p.ctx, 'malformed then right');
    const client = await tlsSession(p.smtp.production.starttls);
    try {
      for (let i = 0; i < 4; i++) assert.match(await client.command('AUTH FOO'), /^504 /);
      assert.match(await client.command(`AUTH PLAIN ${plain(liveKey)}`), /^235 /);
      assert.match(
        await rawSend(client, 'sender@example.com', ['rcpt@example.org'], rawMessage()),
        QUEUED,
      );
    } finally {
      await client.quit();
    }
    assert.equal(await countMessages(p, project.id), 1);
  });
});

describe('SMTP sessions that do not authenticate in time (smtp.unauthenticated_timeout_ms)', () => {
  let p: TestPostern;
  // The server's clock: sessions are timed on it (their sweep runs every second of real time).
  const clock = new ManualClock(Date.now());
  before(async () => {
    p = await startTestPostern({
      clock,
      smtp: true,
      config: { smtp: { unauthenticated_timeout_ms: 1000 } },
    });
  });
  after(async () => p.close());

  test('a session without AUTH is closed with 421 once the time is up, though it is far from the idle timeout; an authenticated one stays', async () => {
    const { liveKey } = await createProjectWithKeys(p.ctx, 'timeout');
    const idle = await RawSmtp.connect(p.smtp.production.starttls);
    const authed = await authedSession(p.smtp.production.starttls, liveKey);
    try {
      assert.match(await idle.client.command('EHLO client.test'), /^250/);
      // Both sessions are in, however long that took: now their time to authenticate runs out.
      clock.advance(1001);
      assert.equal(await idle.client.next(), '421 4.4.2 Not authenticated in time; reconnect');
      await idle.client.closed;
      // The sweep that closed it looked at the authenticated session too, and left it open.
      assert.match(await authed.command('NOOP'), /^250 /);
      assert.match(
        await rawSend(authed, 'sender@example.com', ['rcpt@example.org'], rawMessage()),
        QUEUED,
      );
    } finally {
      idle.client.destroy();
      await authed.quit();
    }
  });
});

describe('SMTP and the per-IP window for keyless requests', () => {
  let p: TestPostern;
  before(async () => {
    p = await startTestPostern({
      smtp: true,
      config: {
        rate_limits: {
          window_seconds: 60,
          send_per_key: 1000,
          batch_per_key: 1000,
          unauthenticated_per_ip: 3,
        },
      },
    });
  });
  after(async () => p.close());

  test('once keyless HTTP requests have spent the window, a valid key still gets through over SMTP and HTTP; a bad AUTH is refused 451 4.3.0 rate_limited', async () => {
    const { project, liveKey } = await createProjectWithKeys(p.ctx, 'behind one address');
    for (let i = 0; i < 3; i++)
      assert.equal((await post(p.production, '/v1/send', { json: validMessage() })).status, 401);
    assert.equal(
      (await post(p.production, '/v1/send', { json: validMessage() })).status,
      429,
      'the window is spent',
    );

    const { client, greeting } = await RawSmtp.connect(p.smtp.production.starttls);
    try {
      assert.match(greeting, /^220 /);
      assert.match(await client.command('EHLO client.test'), /^250/);
      await client.startTls();
      assert.match(await client.command('EHLO client.test'), /^250/);
      // The wait said once (it said "retry in 57 seconds. Retry in 57 seconds.").
      assert.match(
        await client.command(`AUTH PLAIN ${plain(`ps_live_${'B'.repeat(40)}`)}`),
        /^451 4\.3\.0 rate_limited: Too many requests\. Retry in \d+ seconds?\.$/,
      );
      assert.match(await client.command(`AUTH PLAIN ${plain(liveKey)}`), /^235 /);
      assert.match(
        await rawSend(client, 'sender@example.com', ['rcpt@example.org'], rawMessage()),
        QUEUED,
      );
    } finally {
      await client.quit();
    }
    assert.equal(
      (await post(p.production, '/v1/send', { key: liveKey, json: validMessage() })).status,
      202,
    );
    assert.equal(await countMessages(p, project.id), 2);
  });
});
