/**
 * The contract's body-validation rules for POST /v1/send, over real HTTP against the sandbox
 * listener with a test key. Every rejection is checked for its exact envelope and for leaving
 * nothing behind (no `messages` row, no `events` row, no file under the spool).
 */
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { simpleParser } from 'mailparser';
import { ManualClock } from '../../src/clock.js';
import { attachProvider } from '../../src/operator/providers.js';
import {
  createProjectWithKeys,
  type HttpResult,
  post,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { storedMimeOf } from '../support/storedMime.js';
import { storedMimeListIn } from '../support/storeReads.js';

/** The server's clock is fixed, so scheduled_at boundaries are exact. */
const NOW = Date.parse('2026-03-01T12:00:00.000Z');
const HOUR = 3600 * 1000;
const MAX_AHEAD = 72 * HOUR;

const MAX_BODY_TEXT = 2097152;
const MAX_ATTACHMENT = 10485760;
const MAX_ATTACHMENTS_TOTAL = 26214400;

type Detail = { field: string; code: string };
type Json = Record<string, unknown>;

let p: TestPostern;
let key: string;
let liveKey: string;
let projectId: string;

// ---------------------------------------------------------------------------------------------
// helpers

interface Snapshot {
  rows: number;
  events: number;
  files: string[];
}

async function snapshot(t: TestPostern = p): Promise<Snapshot> {
  const count = async (sql: string) => (await t.ctx.store.get<{ c: number }>(sql))!.c;
  return {
    rows: await count('SELECT COUNT(*) c FROM messages'),
    events: await count('SELECT COUNT(*) c FROM events'),
    files: await storedMimeListIn(t.ctx.store, t.stateDir),
  };
}

function send(json: unknown, k: string = key): Promise<HttpResult> {
  return post(p.sandbox, '/v1/send', { key: k, json });
}

/** Sends `json` and asserts the exact 422 envelope with these details, and that nothing was stored. */
async function expectFieldError(json: unknown, details: Detail[]): Promise<void> {
  const before = await snapshot();
  const res = await send(json);
  assert.equal(res.status, 422, `expected 422, got ${res.status}: ${res.text.slice(0, 500)}`);
  assert.deepEqual(res.body, {
    error: {
      type: 'validation_error',
      code: details[0].code,
      message: res.body?.error?.message,
      details,
    },
  });
  assert.equal(typeof res.body.error.message, 'string');
  assert.deepEqual(await snapshot(), before, 'a rejected request stored something');
}

/** Shorthand: one failing field. */
function expectOne(json: unknown, field: string, code: string): Promise<void> {
  return expectFieldError(json, [{ field, code }]);
}

/** Asserts a body-level (no details) error envelope and that nothing was stored on `t`. */
function assertPlainError(res: HttpResult, status: number, type: string, code: string): void {
  assert.equal(
    res.status,
    status,
    `expected ${status}, got ${res.status}: ${res.text.slice(0, 500)}`,
  );
  assert.deepEqual(res.body, { error: { type, code, message: res.body?.error?.message } });
  assert.equal(typeof res.body.error.message, 'string');
}

interface Echo {
  scheduled_at?: string | null;
  paused?: boolean;
  category?: string | null;
  routing?: { provider: string | string[] | null; strategy: string | null };
}

/** Sends `json`, asserts the exact 202 body and that one row and one spool file were added. */
async function expectAccepted(json: unknown, echo: Echo = {}): Promise<string> {
  const before = await snapshot();
  const res = await send(json);
  assert.equal(res.status, 202, `expected 202, got ${res.status}: ${res.text.slice(0, 500)}`);
  assert.match(res.body.id, /^m\.[0-9a-z]{26}$/);
  assert.deepEqual(res.body, {
    id: res.body.id,
    status: 'captured',
    scheduled_at: echo.scheduled_at ?? null,
    paused: echo.paused ?? false,
    category: echo.category ?? null,
    project_id: projectId,
    routing: echo.routing ?? { provider: null, strategy: null },
  });
  const after = await snapshot();
  assert.equal(after.rows, before.rows + 1);
  assert.equal(after.files.length, before.files.length + 1);
  return res.body.id as string;
}

async function storedRow(
  id: string,
): Promise<{ from_email: string; recipients: string; subject: string; category: string | null }> {
  return (await p.ctx.store.get<{
    from_email: string;
    recipients: string;
    subject: string;
    category: string | null;
  }>('SELECT from_email, recipients, subject, category FROM messages WHERE id = ?', id))!;
}

const msg = validMessage;
const emails = (n: number, prefix = 'r') =>
  Array.from({ length: n }, (_, i) => `${prefix}${i}@example.org`);
const att = (over: Json = {}): Json => ({
  filename: 'a.txt',
  content: Buffer.from('hello').toString('base64'),
  ...over,
});
const b64 = (bytes: number) => Buffer.alloc(bytes).toString('base64');
const keys = (n: number, len = 3): Record<string, string> =>
  Object.fromEntries(
    Array.from({ length: n }, (_, i) => [`k${String(i).padStart(len - 1, '0')}`, 'v']),
  );
const iso = (ms: number) => new Date(ms).toISOString();

/** Raw HTTP, for bodies fetch() cannot express (no Content-Type, chunked without Content-Length). */
function rawPost(
  baseUrl: string,
  opts: { headers: Record<string, string>; chunks: string[] },
): Promise<HttpResult> {
  const url = new URL('/v1/send', baseUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        headers: opts.headers,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          let body: unknown;
          try {
            body = JSON.parse(text);
          } catch {
            body = undefined;
          }
          resolve({
            status: res.statusCode ?? 0,
            headers: new Headers(res.headers as Record<string, string>),
            body,
            text,
          });
        });
      },
    );
    // The server may answer before reading the whole body; only a missing answer is a failure.
    req.on('error', reject);
    for (const c of opts.chunks) req.write(c);
    req.end();
  });
}

// ---------------------------------------------------------------------------------------------

describe('POST /v1/send body validation', () => {
  before(async () => {
    p = await startTestPostern({ clock: new ManualClock(NOW) });
    const created = await createProjectWithKeys(p.ctx, 'validation');
    key = created.testKey;
    liveKey = created.liveKey;
    projectId = created.project.id;
    // Routing pins must name attached providers; attach the ones the routing tests pin.
    await attachProvider(p.ctx, projectId, { slug: 'provider-a-api', apiKey: 'k-a' });
    await attachProvider(p.ctx, projectId, { slug: 'provider-b-smtp', host: 'smtp.b.example' });
    await attachProvider(p.ctx, projectId, { slug: 'provider-e-api', apiKey: 'k-e' });
  });
  after(async () => p.close());

  // -------------------------------------------------------------------------------------------
  describe('addresses', () => {
    const forms: Array<{ name: string; value: unknown; email: string }> = [
      { name: 'a bare email', value: 'bare@example.com', email: 'bare@example.com' },
      { name: 'Name <email>', value: 'Jane Doe <jane@example.com>', email: 'jane@example.com' },
      {
        name: '"Quoted, Name" <email>',
        value: '"Doe, Jane" <quoted@example.com>',
        email: 'quoted@example.com',
      },
      { name: 'an object {email}', value: { email: 'obj@example.com' }, email: 'obj@example.com' },
      {
        name: 'an object {email, name}',
        value: { email: 'objn@example.com', name: 'Obj, Name' },
        email: 'objn@example.com',
      },
    ];

    for (const form of forms) {
      test(`from accepts ${form.name}`, async () => {
        const id = await expectAccepted(msg({ from: form.value }));
        assert.equal((await storedRow(id)).from_email, form.email);
      });
      for (const field of ['to', 'cc', 'bcc'] as const) {
        test(`${field} accepts ${form.name} as a single value`, async () => {
          const id = await expectAccepted(
            msg({ [field]: form.value, ...(field === 'to' ? {} : { to: 'x@example.org' }) }),
          );
          const rcpts = JSON.parse((await storedRow(id)).recipients) as Record<string, string[]>;
          assert.deepEqual(rcpts[field], [form.email]);
        });
      }
      test(`reply_to accepts ${form.name} as a single value`, async () => {
        await expectAccepted(msg({ reply_to: form.value }));
      });
    }

    for (const field of ['to', 'cc', 'bcc', 'reply_to'] as const) {
      test(`${field} accepts an array mixing every Address form`, async () => {
        const id = await expectAccepted(msg({ [field]: forms.map((f) => f.value) }));
        if (field !== 'reply_to') {
          const rcpts = JSON.parse((await storedRow(id)).recipients) as Record<string, string[]>;
          assert.deepEqual(
            rcpts[field],
            forms.map((f) => f.email),
          );
        }
      });
    }

    test('a quoted display name may contain escaped quotes', async () => {
      await expectAccepted(msg({ from: '"Jane \\"JD\\" Doe" <jd@example.com>' }));
    });

    const malformed: Array<{ name: string; value: unknown }> = [
      { name: 'a string without @', value: 'not-an-email' },
      { name: 'a string without a domain', value: 'user@' },
      { name: 'a string without a local part', value: '@example.com' },
      { name: 'an empty string', value: '' },
      { name: 'a name with an invalid email in brackets', value: 'Jane <not-an-email>' },
      { name: 'an unclosed angle bracket', value: 'Jane <jane@example.com' },
      { name: 'text after the brackets', value: 'Jane <jane@example.com> extra' },
      { name: 'two addresses in one string', value: 'a@example.com, b@example.com' },
      {
        name: 'a display name containing CR LF (string form)',
        value: 'Evil\r\nBcc: x@example.com <jane@example.com>',
      },
      {
        name: 'a display name containing LF (string form)',
        value: 'Evil\nName <jane@example.com>',
      },
      {
        name: 'a display name containing CR (string form)',
        value: 'Evil\rName <jane@example.com>',
      },
      { name: 'a quoted display name containing LF', value: '"Evil\nName" <jane@example.com>' },
      {
        name: 'an object whose name contains CR LF',
        value: { email: 'jane@example.com', name: 'Evil\r\nBcc: x@example.com' },
      },
      {
        name: 'an object whose name contains LF',
        value: { email: 'jane@example.com', name: 'Evil\nName' },
      },
      {
        name: 'an object with an unknown key',
        value: { email: 'jane@example.com', name: 'Jane', display: 'J' },
      },
      { name: 'an object without email', value: { name: 'Jane' } },
      { name: 'an object with a malformed email', value: { email: 'not-an-email' } },
      { name: 'an object with a non-string name', value: { email: 'jane@example.com', name: 42 } },
    ];

    for (const bad of malformed) {
      test(`from rejects ${bad.name} as from:invalid_address`, async () => {
        await expectOne(msg({ from: bad.value }), 'from', 'from:invalid_address');
      });
      test(`to rejects ${bad.name} at its array position (to.2)`, async () => {
        await expectOne(
          msg({ to: ['a@example.org', { email: 'b@example.org' }, bad.value, 'd@example.org'] }),
          'to.2',
          'to:invalid_address',
        );
      });
    }

    test('from rejects an array (a single address only) as from:invalid_type', async () => {
      await expectOne(msg({ from: ['a@example.com'] }), 'from', 'from:invalid_type');
    });

    test('a number is not an address of any form: from:invalid_type, and to:invalid_type at its position', async () => {
      await expectOne(msg({ from: 42 }), 'from', 'from:invalid_type');
      await expectOne(
        msg({ to: ['a@example.org', { email: 'b@example.org' }, 42] }),
        'to.2',
        'to:invalid_type',
      );
    });

    for (const field of ['to', 'cc', 'bcc', 'reply_to'] as const) {
      test(`${field} as a single malformed value is reported at "${field}"`, async () => {
        await expectOne(
          msg({ [field]: 'Evil\nName <x@example.com>' }),
          field,
          `${field}:invalid_address`,
        );
      });
      test(`${field} reports a bad element at its position (${field}.1)`, async () => {
        await expectOne(
          msg({ [field]: ['ok@example.org', { email: 'ok2@example.org', name: 'A\r\nB' }] }),
          `${field}.1`,
          `${field}:invalid_address`,
        );
      });
      test(`${field} as an empty array is ${field}:too_few`, async () => {
        await expectOne(msg({ [field]: [] }), field, `${field}:too_few`);
      });
    }

    test('several bad recipients in one list give one detail each, in numeric position order', async () => {
      const to = emails(12);
      to[10] = 'bad-10';
      to[2] = 'bad-2';
      await expectFieldError(msg({ to }), [
        { field: 'to.2', code: 'to:invalid_address' },
        { field: 'to.10', code: 'to:invalid_address' },
      ]);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('recipients limit', () => {
    test('50 recipients across to, cc and bcc (mixed forms) are accepted', async () => {
      const to = emails(20, 't').map((e, i) =>
        i % 2 ? { email: e, name: `T ${i}` } : `"T, ${i}" <${e}>`,
      );
      const cc = emails(20, 'c').map((e) => ({ email: e }));
      const bcc = emails(10, 'b');
      await expectAccepted(msg({ to, cc, bcc }));
    });

    test('51 recipients across to, cc and bcc give recipients:too_many', async () => {
      await expectOne(
        msg({ to: emails(20, 't'), cc: emails(20, 'c'), bcc: emails(11, 'b') }),
        'recipients',
        'recipients:too_many',
      );
    });

    test('single-value recipients count too: 49 + 1 + 1 is too many', async () => {
      await expectOne(
        msg({ to: emails(49), cc: 'c@example.org', bcc: { email: 'b@example.org' } }),
        'recipients',
        'recipients:too_many',
      );
    });

    test('51 in to alone gives recipients:too_many', async () => {
      await expectOne(msg({ to: emails(51) }), 'recipients', 'recipients:too_many');
    });

    test('reply_to does not count toward the 50', async () => {
      await expectAccepted(msg({ to: emails(50), reply_to: emails(5, 'rt') }));
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('subject', () => {
    test('998 characters are accepted', async () => {
      await expectAccepted(msg({ subject: 'a'.repeat(998) }));
    });
    test('999 characters give subject:too_long', async () => {
      await expectOne(msg({ subject: 'a'.repeat(999) }), 'subject', 'subject:too_long');
    });
    test('998 two-byte characters (é) are accepted: the limit counts characters, not bytes', async () => {
      const id = await expectAccepted(msg({ subject: 'é'.repeat(998) }));
      assert.equal((await storedRow(id)).subject, 'é'.repeat(998));
    });
    test('999 two-byte characters (é) give subject:too_long', async () => {
      await expectOne(msg({ subject: 'é'.repeat(999) }), 'subject', 'subject:too_long');
    });
    test('998 astral characters (emoji) are accepted: characters are code points', async () => {
      await expectAccepted(msg({ subject: '\u{1F600}'.repeat(998) }));
    });
    test('999 astral characters (emoji) give subject:too_long', async () => {
      await expectOne(msg({ subject: '\u{1F600}'.repeat(999) }), 'subject', 'subject:too_long');
    });
    for (const [name, s] of [
      ['CR', 'Hello\rWorld'],
      ['LF', 'Hello\nWorld'],
      ['CRLF', 'Hello\r\nBcc: x@example.com'],
    ] as const) {
      test(`${name} in the subject is rejected as subject:invalid_format, never folded`, async () => {
        await expectOne(msg({ subject: s }), 'subject', 'subject:invalid_format');
      });
    }
    test('a missing subject is subject:required', async () => {
      const m = msg();
      delete m.subject;
      await expectOne(m, 'subject', 'subject:required');
    });
    test('a non-string subject is subject:invalid_type', async () => {
      await expectOne(msg({ subject: 42 }), 'subject', 'subject:invalid_type');
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('html and text', () => {
    for (const field of ['html', 'text'] as const) {
      const other = field === 'html' ? 'text' : 'html';
      test(`${field} of exactly 2097152 characters is accepted`, async () => {
        await expectAccepted(msg({ [field]: 'a'.repeat(MAX_BODY_TEXT), [other]: undefined }));
      });
      test(`${field} of 2097153 characters gives ${field}:too_long`, async () => {
        await expectOne(
          msg({ [field]: 'a'.repeat(MAX_BODY_TEXT + 1) }),
          field,
          `${field}:too_long`,
        );
      });
      test(`a non-string ${field} is ${field}:invalid_type`, async () => {
        await expectOne(msg({ [field]: 42 }), field, `${field}:invalid_type`);
      });
    }
    test('neither html nor text gives body:required', async () => {
      const m = msg();
      delete m.text;
      await expectOne(m, 'body', 'body:required');
    });
    test('html and text both null give body:required', async () => {
      await expectOne(msg({ html: null, text: null }), 'body', 'body:required');
    });
    test('html alone is enough', async () => {
      await expectAccepted(msg({ text: undefined, html: '<p>hi</p>' }));
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('headers', () => {
    test('a header value of 8192 characters is accepted', async () => {
      await expectAccepted(msg({ headers: { 'X-Long': 'a'.repeat(8192) } }));
    });
    test('a header value of 8193 characters gives headers:value_too_long', async () => {
      await expectOne(
        msg({ headers: { 'X-Long': 'a'.repeat(8193) } }),
        'headers.X-Long',
        'headers:value_too_long',
      );
    });
    for (const name of [
      'From',
      'to',
      'Message-ID',
      'DKIM-Signature',
      'X-Service-Anything',
      'x-service-foo',
    ]) {
      test(`the reserved header "${name}" gives headers:reserved at headers.${name}`, async () => {
        await expectOne(
          msg({ headers: { [name]: 'value' } }),
          `headers.${name}`,
          'headers:reserved',
        );
      });
    }
    for (const [name, v] of [
      ['CR', 'a\rb'],
      ['LF', 'a\nb'],
      ['CRLF', 'a\r\nBcc: x@example.com'],
    ] as const) {
      test(`${name} in a header value is rejected as headers:invalid_value, never folded`, async () => {
        await expectOne(
          msg({ headers: { 'X-Custom': v } }),
          'headers.X-Custom',
          'headers:invalid_value',
        );
      });
    }
    test('a non-string header value is headers:invalid_value', async () => {
      await expectOne(msg({ headers: { 'X-Num': 5 } }), 'headers.X-Num', 'headers:invalid_value');
    });
    for (const name of ['X Space', 'X:Colon', 'X-\u00e9']) {
      test(`the malformed header name ${JSON.stringify(name)} is headers:invalid_name`, async () => {
        await expectOne(
          msg({ headers: { [name]: 'v' } }),
          `headers.${name}`,
          'headers:invalid_name',
        );
      });
    }
    // Issue 32: 150 values of 8,000 characters were a 202 for a message whose header block no
    // parser of Postern's reads back (the console's, the JSON providers'): mailsplit stops at 1 MiB.
    const manyHeaders = (n: number, value: string) =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`X-Pad-${i}`, value]));
    test('custom headers that make a header block over 1 MiB (150 values of 8,000 characters) give headers:too_large', async () => {
      await expectOne(
        msg({ headers: manyHeaders(150, 'v'.repeat(8000)) }),
        'headers',
        'headers:too_large',
      );
    });
    test('the block is counted as composed: 40 values of 8,192 emoji (RFC 2047 words, about 2.2 MB) give headers:too_large', async () => {
      await expectOne(
        msg({ headers: manyHeaders(40, '\u{1F600}'.repeat(8192)) }),
        'headers',
        'headers:too_large',
      );
    });
    test('with an attachment big enough for the message to be composed as a stream, the same', async () => {
      await expectOne(
        msg({
          headers: manyHeaders(150, 'v'.repeat(8000)),
          attachments: [att({ content: b64(300 * 1024) })],
        }),
        'headers',
        'headers:too_large',
      );
    });
    test('100 values of 8,000 characters (about 820 KB of header block) are accepted, and the stored message parses', async () => {
      const id = await expectAccepted(msg({ headers: manyHeaders(100, 'v'.repeat(8000)) }));
      const parsed = await simpleParser(await storedMimeOf(p.ctx.store, p.stateDir, id));
      assert.equal(parsed.headers.get('x-pad-99'), 'v'.repeat(8000));
    });
    test('ordinary custom headers are accepted', async () => {
      await expectAccepted(
        msg({
          headers: {
            'X-Campaign': 'spring',
            'List-Unsubscribe': '<mailto:u@example.com>',
            'X-Servicey': 'not the reserved prefix',
          },
        }),
      );
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('attachments', () => {
    test('20 attachments are accepted', async () => {
      await expectAccepted(
        msg({ attachments: Array.from({ length: 20 }, (_, i) => att({ filename: `f${i}.txt` })) }),
      );
    });
    test('21 attachments give attachments:too_many', async () => {
      await expectOne(
        msg({ attachments: Array.from({ length: 21 }, (_, i) => att({ filename: `f${i}.txt` })) }),
        'attachments',
        'attachments:too_many',
      );
    });

    for (const field of ['filename', 'content_type', 'content_id'] as const) {
      test(`${field} of 255 characters is accepted`, async () => {
        await expectAccepted(msg({ attachments: [att({ [field]: 'a'.repeat(255) })] }));
      });
      test(`${field} of 256 characters gives attachments:too_long at attachments.1.${field}`, async () => {
        await expectOne(
          msg({ attachments: [att(), att({ [field]: 'a'.repeat(256) })] }),
          `attachments.1.${field}`,
          'attachments:too_long',
        );
      });
    }

    for (const [name, f] of [
      ['CR', 'a\r.txt'],
      ['LF', 'a\n.txt'],
      ['CRLF', 'a\r\nContent-Type: text/html'],
    ] as const) {
      test(`${name} in a filename is rejected as attachments:invalid_format, never folded`, async () => {
        await expectOne(
          msg({ attachments: [att({ filename: f })] }),
          'attachments.0.filename',
          'attachments:invalid_format',
        );
      });
    }

    test('a missing filename is attachments:required', async () => {
      await expectOne(
        msg({ attachments: [{ content: 'aGk=' }] }),
        'attachments.0.filename',
        'attachments:required',
      );
    });
    test('a missing content is attachments:required', async () => {
      await expectOne(
        msg({ attachments: [{ filename: 'a.txt' }] }),
        'attachments.0.content',
        'attachments:required',
      );
    });
    test('an unknown attachment key is attachments:unknown_key', async () => {
      await expectOne(
        msg({ attachments: [att({ encoding: 'base64' })] }),
        'attachments.0.encoding',
        'attachments:unknown_key',
      );
    });
    for (const bad of ['not base64!', 'aGVsbG8=\n', 'abcde', 'ab==cd']) {
      test(`content ${JSON.stringify(bad)} is attachments:invalid_base64`, async () => {
        await expectOne(
          msg({ attachments: [att({ content: bad })] }),
          'attachments.0.content',
          'attachments:invalid_base64',
        );
      });
    }
    test('a disposition other than attachment/inline is attachments:invalid_value', async () => {
      await expectOne(
        msg({ attachments: [att({ disposition: 'embedded' })] }),
        'attachments.0.disposition',
        'attachments:invalid_value',
      );
    });
    test('an inline attachment without content_id is attachments:content_id_required', async () => {
      await expectOne(
        msg({ attachments: [att(), att({ disposition: 'inline' })] }),
        'attachments.1.content_id',
        'attachments:content_id_required',
      );
    });
    test('an inline attachment with a null content_id is attachments:content_id_required', async () => {
      await expectOne(
        msg({ attachments: [att({ disposition: 'inline', content_id: null })] }),
        'attachments.0.content_id',
        'attachments:content_id_required',
      );
    });
    test('inline with content_id, and explicit attachment disposition, are accepted', async () => {
      await expectAccepted(
        msg({
          html: '<img src="cid:logo">',
          attachments: [
            att({
              filename: 'logo.png',
              content_type: 'image/png',
              content_id: 'logo',
              disposition: 'inline',
            }),
            att({ disposition: 'attachment' }),
          ],
        }),
      );
    });

    test('an attachment of exactly 10485760 decoded bytes is accepted', async () => {
      await expectAccepted(
        msg({ attachments: [att({ filename: 'big.bin', content: b64(MAX_ATTACHMENT) })] }),
      );
    });
    test('an attachment of 10485761 decoded bytes gives attachments:too_large at its content', async () => {
      await expectOne(
        msg({
          attachments: [att(), att({ filename: 'big.bin', content: b64(MAX_ATTACHMENT + 1) })],
        }),
        'attachments.1.content',
        'attachments:too_large',
      );
    });
    test('attachments totalling exactly 26214400 decoded bytes (3 attachments) are accepted', async () => {
      const sizes = [MAX_ATTACHMENT, MAX_ATTACHMENT, MAX_ATTACHMENTS_TOTAL - 2 * MAX_ATTACHMENT];
      await expectAccepted(
        msg({
          attachments: sizes.map((n, i) => att({ filename: `part${i}.bin`, content: b64(n) })),
        }),
      );
    });
    test('attachments totalling 26214401 decoded bytes give attachments:total_too_large', async () => {
      const sizes = [
        MAX_ATTACHMENT,
        MAX_ATTACHMENT,
        MAX_ATTACHMENTS_TOTAL - 2 * MAX_ATTACHMENT + 1,
      ];
      await expectOne(
        msg({
          attachments: sizes.map((n, i) => att({ filename: `part${i}.bin`, content: b64(n) })),
        }),
        'attachments',
        'attachments:total_too_large',
      );
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('tags and metadata', () => {
    test('10 tags are accepted', async () => {
      await expectAccepted(msg({ tags: Array.from({ length: 10 }, (_, i) => `tag_${i}`) }));
    });
    test('11 tags give tags:too_many', async () => {
      await expectOne(
        msg({ tags: Array.from({ length: 11 }, (_, i) => `tag_${i}`) }),
        'tags',
        'tags:too_many',
      );
    });
    test('a tag of 64 characters is accepted', async () => {
      await expectAccepted(msg({ tags: [`${'A-z_0'.repeat(12)}abcd`] }));
    });
    test('a tag of 65 characters gives tags:too_long at its position', async () => {
      await expectOne(msg({ tags: ['ok', 'a'.repeat(65)] }), 'tags.1', 'tags:too_long');
    });
    for (const bad of ['has space', 'dot.ted', 'caf\u00e9', '', 'slash/x']) {
      test(`the tag ${JSON.stringify(bad)} gives tags:invalid_format`, async () => {
        await expectOne(msg({ tags: ['ok', bad] }), 'tags.1', 'tags:invalid_format');
      });
    }

    test('10 metadata keys are accepted', async () => {
      await expectAccepted(msg({ metadata: keys(10) }));
    });
    test('11 metadata keys give metadata:too_many_keys', async () => {
      await expectOne(msg({ metadata: keys(11) }), 'metadata', 'metadata:too_many_keys');
    });
    test('a metadata key of 40 characters is accepted', async () => {
      await expectAccepted(msg({ metadata: { ['k'.repeat(40)]: 'v' } }));
    });
    test('a metadata key of 41 characters gives metadata:key_too_long', async () => {
      const k = 'k'.repeat(41);
      await expectOne(
        msg({ metadata: { ok: 'v', [k]: 'v' } }),
        `metadata.${k}`,
        'metadata:key_too_long',
      );
    });
    test('a metadata value of 500 characters is accepted', async () => {
      await expectAccepted(msg({ metadata: { order: 'v'.repeat(500) } }));
    });
    test('a metadata value of 501 characters gives metadata:value_too_long', async () => {
      await expectOne(
        msg({ metadata: { order: 'v'.repeat(501) } }),
        'metadata.order',
        'metadata:value_too_long',
      );
    });
    test('a non-string metadata value gives metadata:invalid_value', async () => {
      await expectOne(
        msg({ metadata: { order: 123 } }),
        'metadata.order',
        'metadata:invalid_value',
      );
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('category', () => {
    test('64 characters are accepted and echoed', async () => {
      const c = 'C'.repeat(64);
      await expectAccepted(msg({ category: c }), { category: c });
    });
    test('65 characters give category:too_long', async () => {
      await expectOne(msg({ category: 'c'.repeat(65) }), 'category', 'category:too_long');
    });
    test('an empty category gives category:too_short', async () => {
      await expectOne(msg({ category: '' }), 'category', 'category:too_short');
    });
    for (const good of ['a', '7', 'Billing/Invoices: Q1 2026_v1.2-final', '9lives', 'Z- ./:_']) {
      test(`the category ${JSON.stringify(good)} is accepted and echoed verbatim`, async () => {
        const id = await expectAccepted(msg({ category: good }), { category: good });
        assert.equal((await storedRow(id)).category, good);
      });
    }
    for (const bad of [
      '-lead',
      ' lead',
      '_lead',
      '.lead',
      '/lead',
      ':lead',
      'a!b',
      'a,b',
      'a\nb',
      'caf\u00e9',
      'a\tb',
    ]) {
      test(`the category ${JSON.stringify(bad)} gives category:invalid_format`, async () => {
        await expectOne(msg({ category: bad }), 'category', 'category:invalid_format');
      });
    }
    test('categories are case-sensitive: "Welcome" and "welcome" are each echoed as sent', async () => {
      await expectAccepted(msg({ category: 'Welcome' }), { category: 'Welcome' });
      await expectAccepted(msg({ category: 'welcome' }), { category: 'welcome' });
      await expectAccepted(msg({ category: 'WeLcOmE' }), { category: 'WeLcOmE' });
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('scheduled_at (server clock fixed at 2026-03-01T12:00:00Z)', () => {
    test('72 hours minus a minute ahead is accepted and echoed verbatim', async () => {
      const at = iso(NOW + MAX_AHEAD - 60_000);
      await expectAccepted(msg({ scheduled_at: at }), { scheduled_at: at });
    });
    test('exactly 72 hours ahead is accepted', async () => {
      const at = iso(NOW + MAX_AHEAD);
      await expectAccepted(msg({ scheduled_at: at }), { scheduled_at: at });
    });
    test('exactly 72 hours ahead written with a +05:30 offset is accepted and echoed verbatim', async () => {
      await expectAccepted(msg({ scheduled_at: '2026-03-04T17:30:00+05:30' }), {
        scheduled_at: '2026-03-04T17:30:00+05:30',
      });
    });
    test('one millisecond in the future is accepted', async () => {
      const at = iso(NOW + 1);
      await expectAccepted(msg({ scheduled_at: at }), { scheduled_at: at });
    });
    test('72 hours plus a millisecond is scheduled_at:too_far', async () => {
      await expectOne(
        msg({ scheduled_at: iso(NOW + MAX_AHEAD + 1) }),
        'scheduled_at',
        'scheduled_at:too_far',
      );
    });
    test('72 hours plus a minute is scheduled_at:too_far', async () => {
      await expectOne(
        msg({ scheduled_at: iso(NOW + MAX_AHEAD + 60_000) }),
        'scheduled_at',
        'scheduled_at:too_far',
      );
    });
    test('72 hours plus a minute written with a -08:00 offset is scheduled_at:too_far', async () => {
      await expectOne(
        msg({ scheduled_at: '2026-03-04T04:01:00-08:00' }),
        'scheduled_at',
        'scheduled_at:too_far',
      );
    });
    test('exactly now is scheduled_at:too_soon', async () => {
      await expectOne(msg({ scheduled_at: iso(NOW) }), 'scheduled_at', 'scheduled_at:too_soon');
    });
    test('a past instant is scheduled_at:too_soon', async () => {
      await expectOne(
        msg({ scheduled_at: iso(NOW - 60_000) }),
        'scheduled_at',
        'scheduled_at:too_soon',
      );
    });
    for (const bad of [
      'tomorrow',
      '2026-03-02T12:00:00',
      '2026-03-02',
      '2026-02-30T12:00:00Z',
      '2026-03-02T25:00:00Z',
      '',
    ]) {
      test(`${JSON.stringify(bad)} is scheduled_at:invalid`, async () => {
        await expectOne(msg({ scheduled_at: bad }), 'scheduled_at', 'scheduled_at:invalid');
      });
    }
    test('a leap-second instant is never accepted without a usable time (either invalid, or stored as its instant)', async () => {
      const raw = '2026-03-02T23:59:60Z';
      const before = await snapshot();
      const res = await send(msg({ scheduled_at: raw }));
      if (res.status === 422) {
        assert.deepEqual(res.body, {
          error: {
            type: 'validation_error',
            code: 'scheduled_at:invalid',
            message: res.body.error.message,
            details: [{ field: 'scheduled_at', code: 'scheduled_at:invalid' }],
          },
        });
        assert.deepEqual(await snapshot(), before);
      } else {
        assert.equal(res.status, 202, res.text);
        const row = (await p.ctx.store.get<{ scheduled_at: number | null }>(
          'SELECT scheduled_at FROM messages WHERE id = ?',
          res.body.id,
        ))!;
        assert.equal(
          row.scheduled_at,
          Date.parse('2026-03-03T00:00:00Z'),
          'accepted with a scheduled_at the index cannot use',
        );
      }
    });
    test('a number is scheduled_at:invalid', async () => {
      await expectOne(
        msg({ scheduled_at: Date.parse('2026-03-02T12:00:00Z') }),
        'scheduled_at',
        'scheduled_at:invalid',
      );
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('paused', () => {
    test('a non-boolean paused is paused:invalid_type', async () => {
      await expectOne(msg({ paused: 'yes' }), 'paused', 'paused:invalid_type');
    });
    test('paused true is reported in the sandbox 202', async () => {
      await expectAccepted(msg({ paused: true }), { paused: true });
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('routing', () => {
    test('a provider given as a string is echoed exactly', async () => {
      await expectAccepted(msg({ routing: { provider: 'provider-a-api' } }), {
        routing: { provider: 'provider-a-api', strategy: null },
      });
    });
    test('a provider list is echoed exactly, in order, with the strategy', async () => {
      await expectAccepted(
        msg({
          routing: { provider: ['provider-b-smtp', 'provider-a-api'], strategy: 'round-robin' },
        }),
        {
          routing: { provider: ['provider-b-smtp', 'provider-a-api'], strategy: 'round-robin' },
        },
      );
    });
    test('a one-element provider list stays a list in the echo', async () => {
      await expectAccepted(msg({ routing: { provider: ['provider-e-api'] } }), {
        routing: { provider: ['provider-e-api'], strategy: null },
      });
    });
    for (const strategy of ['fallback', 'round-robin', 'random', 'free-first']) {
      test(`the strategy "${strategy}" alone is accepted and echoed`, async () => {
        await expectAccepted(msg({ routing: { strategy } }), {
          routing: { provider: null, strategy },
        });
      });
    }
    test('an unknown routing key is routing:unknown_key', async () => {
      await expectOne(
        msg({ routing: { provider: 'provider-a-api', weight: 3 } }),
        'routing.weight',
        'routing:unknown_key',
      );
    });
    test('an unknown provider slug is routing:invalid_provider', async () => {
      await expectOne(
        msg({ routing: { provider: 'provider-z-api' } }),
        'routing.provider',
        'routing:invalid_provider',
      );
    });
    test('an unknown slug inside a list is routing:invalid_provider', async () => {
      await expectOne(
        msg({ routing: { provider: ['provider-a-api', 'Provider-B-SMTP'] } }),
        'routing.provider',
        'routing:invalid_provider',
      );
    });
    test('an empty provider list is routing:invalid_provider', async () => {
      await expectOne(
        msg({ routing: { provider: [] } }),
        'routing.provider',
        'routing:invalid_provider',
      );
    });
    test('duplicate slugs in a list are routing:duplicate_provider', async () => {
      await expectOne(
        msg({ routing: { provider: ['provider-a-api', 'provider-b-smtp', 'provider-a-api'] } }),
        'routing.provider',
        'routing:duplicate_provider',
      );
    });
    test('an unknown strategy is routing:invalid_strategy', async () => {
      await expectOne(
        msg({ routing: { strategy: 'fastest' } }),
        'routing.strategy',
        'routing:invalid_strategy',
      );
    });
    test('a non-object routing is routing:invalid_type', async () => {
      await expectOne(msg({ routing: 'provider-a-api' }), 'routing', 'routing:invalid_type');
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('provider_options', () => {
    test('configuration_set of 255 characters is accepted', async () => {
      await expectAccepted(
        msg({ provider_options: { 'provider-a-api': { configuration_set: 'c'.repeat(255) } } }),
      );
    });
    test('configuration_set of 256 characters is provider_options:too_long', async () => {
      await expectOne(
        msg({ provider_options: { 'provider-a-api': { configuration_set: 'c'.repeat(256) } } }),
        'provider_options.provider-a-api.configuration_set',
        'provider_options:too_long',
      );
    });
    test('message_stream of 255 characters is accepted', async () => {
      await expectAccepted(
        msg({ provider_options: { 'provider-e-api': { message_stream: 's'.repeat(255) } } }),
      );
    });
    test('message_stream of 256 characters is provider_options:too_long', async () => {
      await expectOne(
        msg({ provider_options: { 'provider-e-api': { message_stream: 's'.repeat(256) } } }),
        'provider_options.provider-e-api.message_stream',
        'provider_options:too_long',
      );
    });
    for (const [provider, option] of [
      ['provider-a-api', 'configuration_set'],
      ['provider-e-api', 'message_stream'],
    ]) {
      test(`${option} with CR or LF is provider_options:invalid_format (it becomes a relay header)`, async () => {
        for (const value of ['cs\r\nBcc: attacker@evil.example', 'cs\nX-Injected: 1', 'cs\r']) {
          await expectOne(
            msg({ provider_options: { [provider]: { [option]: value } } }),
            `provider_options.${provider}.${option}`,
            'provider_options:invalid_format',
          );
        }
      });
    }
    test('an unknown provider key is provider_options:unknown_provider', async () => {
      await expectOne(
        msg({ provider_options: { 'provider-b-api': { tag: 'x' } } }),
        'provider_options.provider-b-api',
        'provider_options:unknown_provider',
      );
    });
    test('an unknown option key is provider_options:unknown_option', async () => {
      await expectOne(
        msg({
          provider_options: { 'provider-a-api': { configuration_set: 'cs', tracking: 'on' } },
        }),
        'provider_options.provider-a-api.tracking',
        'provider_options:unknown_option',
      );
    });
    test('an option of another provider is provider_options:unknown_option', async () => {
      await expectOne(
        msg({ provider_options: { 'provider-e-api': { configuration_set: 'cs' } } }),
        'provider_options.provider-e-api.configuration_set',
        'provider_options:unknown_option',
      );
    });
    test('a non-object provider_options is provider_options:invalid_type', async () => {
      await expectOne(
        msg({ provider_options: 'x' }),
        'provider_options',
        'provider_options:invalid_type',
      );
    });
    test('a non-string option value is provider_options:invalid_type', async () => {
      await expectOne(
        msg({ provider_options: { 'provider-a-api': { configuration_set: 5 } } }),
        'provider_options.provider-a-api.configuration_set',
        'provider_options:invalid_type',
      );
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('structure and nulls', () => {
    test('an unknown top-level key is body:unknown_key at that key', async () => {
      await expectOne(msg({ sender: 'x@example.com' }), 'sender', 'body:unknown_key');
    });
    test('several unknown keys give one detail each, ordered by name, after every known field', async () => {
      await expectFieldError(msg({ zeta: 1, alpha: 2, subject: 'a\nb' }), [
        { field: 'subject', code: 'subject:invalid_format' },
        { field: 'alpha', code: 'body:unknown_key' },
        { field: 'zeta', code: 'body:unknown_key' },
      ]);
    });
    test('an unknown key named like a rule field ("recipients", "body") still sorts after every known field', async () => {
      await expectFieldError(
        msg({ recipients: ['a@example.org'], body: 'hello', subject: 'a\nb' }),
        [
          { field: 'subject', code: 'subject:invalid_format' },
          { field: 'body', code: 'body:unknown_key' },
          { field: 'recipients', code: 'body:unknown_key' },
        ],
      );
    });
    test('a missing from is from:required', async () => {
      const m = msg();
      delete m.from;
      await expectOne(m, 'from', 'from:required');
    });
    test('a missing to is to:required', async () => {
      const m = msg();
      delete m.to;
      await expectOne(m, 'to', 'to:required');
    });
    test('null for every nullable top-level field is accepted as absent', async () => {
      await expectAccepted(
        msg({
          html: null,
          text: 'body',
          headers: null,
          attachments: null,
          tags: null,
          metadata: null,
          category: null,
          scheduled_at: null,
          paused: null,
          routing: null,
          provider_options: null,
        }),
      );
    });
    test('null text with html present is accepted', async () => {
      await expectAccepted(msg({ html: '<b>x</b>', text: null }));
    });
    test('null for every nullable attachment field and both routing fields is accepted as absent', async () => {
      await expectAccepted(
        msg({
          attachments: [att({ content_type: null, content_id: null, disposition: null })],
          routing: { provider: null, strategy: null },
        }),
      );
    });
    test('null from is from:invalid_type', async () => {
      await expectOne(msg({ from: null }), 'from', 'from:invalid_type');
    });
    test('null to is to:invalid_type', async () => {
      await expectOne(msg({ to: null }), 'to', 'to:invalid_type');
    });
    test('null subject is subject:invalid_type', async () => {
      await expectOne(msg({ subject: null }), 'subject', 'subject:invalid_type');
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('several failures in one request', () => {
    test('one detail per failing field, in the Message table order, top-level code = first detail', async () => {
      const body = {
        extra: true,
        provider_options: { 'provider-a-api': { tracking: 'on' } },
        routing: { provider: 'nope', strategy: 'fastest' },
        paused: 'yes',
        scheduled_at: 'garbage',
        category: '-x',
        metadata: { order: 5 },
        tags: ['ok', 'bad tag'],
        attachments: [{ filename: 'a.txt' }],
        headers: { 'X-Ok': 'a\nb', 'Message-ID': '<x@y>' },
        subject: 's'.repeat(999),
        reply_to: 'nope',
        bcc: ['b@example.org'],
        cc: [],
        to: ['ok@example.org', 'bad'],
        from: 'Evil\nName <e@example.com>',
      };
      await expectFieldError(body, [
        { field: 'from', code: 'from:invalid_address' },
        { field: 'to.1', code: 'to:invalid_address' },
        { field: 'cc', code: 'cc:too_few' },
        { field: 'reply_to', code: 'reply_to:invalid_address' },
        { field: 'subject', code: 'subject:too_long' },
        { field: 'body', code: 'body:required' },
        { field: 'headers.Message-ID', code: 'headers:reserved' },
        { field: 'headers.X-Ok', code: 'headers:invalid_value' },
        { field: 'attachments.0.content', code: 'attachments:required' },
        { field: 'tags.1', code: 'tags:invalid_format' },
        { field: 'metadata.order', code: 'metadata:invalid_value' },
        { field: 'category', code: 'category:invalid_format' },
        { field: 'scheduled_at', code: 'scheduled_at:invalid' },
        { field: 'paused', code: 'paused:invalid_type' },
        { field: 'routing.provider', code: 'routing:invalid_provider' },
        { field: 'routing.strategy', code: 'routing:invalid_strategy' },
        {
          field: 'provider_options.provider-a-api.tracking',
          code: 'provider_options:unknown_option',
        },
        { field: 'extra', code: 'body:unknown_key' },
      ]);
    });

    test('recipients:too_many sits between bcc and reply_to; html:too_long before text', async () => {
      const cc = emails(51);
      cc[3] = 'bad';
      await expectFieldError(
        msg({
          cc,
          reply_to: ['x@example.org', 'bad'],
          html: 'h'.repeat(MAX_BODY_TEXT + 1),
          text: 42,
        }),
        [
          { field: 'cc.3', code: 'cc:invalid_address' },
          { field: 'recipients', code: 'recipients:too_many' },
          { field: 'reply_to.1', code: 'reply_to:invalid_address' },
          { field: 'html', code: 'html:too_long' },
          { field: 'text', code: 'text:invalid_type' },
        ],
      );
    });

    test('clock- and size-bound rules are reported alongside schema failures', async () => {
      await expectFieldError(
        msg({
          subject: 'a\rb',
          attachments: [att({ disposition: 'inline' }), att({ content: b64(MAX_ATTACHMENT + 1) })],
          scheduled_at: iso(NOW - 1000),
        }),
        [
          { field: 'subject', code: 'subject:invalid_format' },
          { field: 'attachments.0.content_id', code: 'attachments:content_id_required' },
          { field: 'attachments.1.content', code: 'attachments:too_large' },
          { field: 'scheduled_at', code: 'scheduled_at:too_soon' },
        ],
      );
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('body-level answers', () => {
    async function expectPlain(
      res: HttpResult,
      status: number,
      type: string,
      code: string,
      before: Snapshot,
    ): Promise<void> {
      assertPlainError(res, status, type, code);
      assert.deepEqual(await snapshot(), before, 'a rejected request stored something');
    }

    for (const raw of [
      '{"from":',
      '{"from": "a@example.com",}',
      "{'from': 'a'}",
      '{} trailing',
      'undefined',
    ]) {
      test(`unparseable JSON ${JSON.stringify(raw)} is 400 body:invalid_json`, async () => {
        const before = await snapshot();
        await expectPlain(
          await post(p.sandbox, '/v1/send', { key, raw }),
          400,
          'validation_error',
          'body:invalid_json',
          before,
        );
      });
    }
    for (const raw of ['', '   ']) {
      test(`an empty body ${JSON.stringify(raw)} is 400 body:invalid_json`, async () => {
        const before = await snapshot();
        await expectPlain(
          await post(p.sandbox, '/v1/send', { key, raw }),
          400,
          'validation_error',
          'body:invalid_json',
          before,
        );
      });
    }
    for (const raw of [
      '[]',
      JSON.stringify([validMessage()]),
      '"a string"',
      '42',
      'null',
      'true',
    ]) {
      test(`the non-object JSON body ${raw.slice(0, 20)} is 422 body:invalid_type with details`, async () => {
        const before = await snapshot();
        const res = await post(p.sandbox, '/v1/send', { key, raw });
        assert.equal(res.status, 422, res.text);
        assert.deepEqual(res.body, {
          error: {
            type: 'validation_error',
            code: 'body:invalid_type',
            message: res.body.error.message,
            details: [{ field: 'body', code: 'body:invalid_type' }],
          },
        });
        assert.deepEqual(await snapshot(), before);
      });
    }
    for (const ct of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/jsonx',
      'multipart/form-data; boundary=x',
    ]) {
      test(`Content-Type ${ct} is 415 body:unsupported_media_type`, async () => {
        const before = await snapshot();
        const res = await post(p.sandbox, '/v1/send', {
          key,
          json: validMessage(),
          headers: { 'content-type': ct },
        });
        await expectPlain(res, 415, 'validation_error', 'body:unsupported_media_type', before);
      });
    }
    test('a missing Content-Type is 415 body:unsupported_media_type', async () => {
      const before = await snapshot();
      const res = await rawPost(p.sandbox, {
        headers: { authorization: `Bearer ${key}` },
        chunks: [JSON.stringify(validMessage())],
      });
      await expectPlain(res, 415, 'validation_error', 'body:unsupported_media_type', before);
    });
    for (const ct of [
      'application/json; charset=utf-8',
      'Application/JSON',
      'APPLICATION/JSON; charset=UTF-8',
    ]) {
      test(`Content-Type ${ct} is accepted (media types are case-insensitive, parameters allowed)`, async () => {
        const before = await snapshot();
        const res = await post(p.sandbox, '/v1/send', {
          key,
          json: validMessage(),
          headers: { 'content-type': ct },
        });
        assert.equal(res.status, 202, res.text);
        assert.equal((await snapshot()).rows, before.rows + 1);
      });
    }

    describe('authentication comes before the body', () => {
      const unknownKey = `ps_test_${'A'.repeat(40)}`;
      test('no key with invalid JSON is 401 missing_api_key', async () => {
        const before = await snapshot();
        await expectPlain(
          await post(p.sandbox, '/v1/send', { raw: '{"from":' }),
          401,
          'authentication_error',
          'missing_api_key',
          before,
        );
      });
      test('an unknown key with invalid JSON is 401 invalid_api_key', async () => {
        const before = await snapshot();
        await expectPlain(
          await post(p.sandbox, '/v1/send', { key: unknownKey, raw: '{"from":' }),
          401,
          'authentication_error',
          'invalid_api_key',
          before,
        );
      });
      test('an unknown key with an unsupported Content-Type is 401 invalid_api_key', async () => {
        const before = await snapshot();
        const res = await post(p.sandbox, '/v1/send', {
          key: unknownKey,
          raw: 'hello',
          headers: { 'content-type': 'text/plain' },
        });
        await expectPlain(res, 401, 'authentication_error', 'invalid_api_key', before);
      });
      test('a live key on the sandbox with an invalid body is 401 mode_mismatch', async () => {
        const before = await snapshot();
        await expectPlain(
          await post(p.sandbox, '/v1/send', { key: liveKey, json: [] }),
          401,
          'authentication_error',
          'mode_mismatch',
          before,
        );
      });
      test('an unknown key with a schema-invalid body is 401 invalid_api_key', async () => {
        const before = await snapshot();
        await expectPlain(
          await post(p.sandbox, '/v1/send', { key: unknownKey, json: { from: 'bad' } }),
          401,
          'authentication_error',
          'invalid_api_key',
          before,
        );
      });
    });

    describe('the configured body size limit (max_body_bytes 2048)', () => {
      let small: TestPostern;
      let smallKey: string;
      const LIMIT = 2048;
      /** A valid message whose JSON is exactly `bytes` bytes. */
      const sized = (bytes: number): string => {
        const base = JSON.stringify(validMessage({ text: '' }));
        const body = JSON.stringify(
          validMessage({ text: 'x'.repeat(bytes - Buffer.byteLength(base)) }),
        );
        assert.equal(Buffer.byteLength(body), bytes);
        return body;
      };

      before(async () => {
        small = await startTestPostern({
          clock: new ManualClock(NOW),
          config: { http: { max_body_bytes: LIMIT } },
        });
        smallKey = (await createProjectWithKeys(small.ctx, 'small')).testKey;
      });
      after(async () => small.close());

      test('a body of exactly the limit is accepted', async () => {
        const before = await snapshot(small);
        const res = await post(small.sandbox, '/v1/send', { key: smallKey, raw: sized(LIMIT) });
        assert.equal(res.status, 202, res.text);
        assert.equal((await snapshot(small)).rows, before.rows + 1);
      });
      test('a body one byte over the limit, with Content-Length, is 413 body:too_large', async () => {
        const before = await snapshot(small);
        const res = await post(small.sandbox, '/v1/send', { key: smallKey, raw: sized(LIMIT + 1) });
        assertPlainError(res, 413, 'validation_error', 'body:too_large');
        assert.deepEqual(await snapshot(small), before);
      });
      test('a body one byte over the limit, chunked without Content-Length, is 413 body:too_large', async () => {
        const before = await snapshot(small);
        const body = sized(LIMIT + 1);
        const res = await rawPost(small.sandbox, {
          headers: {
            authorization: `Bearer ${smallKey}`,
            'content-type': 'application/json',
            'transfer-encoding': 'chunked',
          },
          chunks: [body.slice(0, 1000), body.slice(1000)],
        });
        assertPlainError(res, 413, 'validation_error', 'body:too_large');
        assert.deepEqual(await snapshot(small), before);
      });
      test('a much larger chunked body is 413 body:too_large and the server keeps serving', async () => {
        const before = await snapshot(small);
        const body = sized(64 * 1024);
        const chunks: string[] = [];
        for (let i = 0; i < body.length; i += 4096) chunks.push(body.slice(i, i + 4096));
        const res = await rawPost(small.sandbox, {
          headers: {
            authorization: `Bearer ${smallKey}`,
            'content-type': 'application/json',
            'transfer-encoding': 'chunked',
          },
          chunks,
        });
        assertPlainError(res, 413, 'validation_error', 'body:too_large');
        assert.deepEqual(await snapshot(small), before);
        const ok = await post(small.sandbox, '/v1/send', { key: smallKey, json: validMessage() });
        assert.equal(ok.status, 202, ok.text);
      });
      test('an over-limit Content-Length is 413 even when the JSON would also be invalid', async () => {
        const before = await snapshot(small);
        const res = await post(small.sandbox, '/v1/send', {
          key: smallKey,
          raw: `{${' '.repeat(LIMIT + 10)}`,
        });
        assertPlainError(res, 413, 'validation_error', 'body:too_large');
        assert.deepEqual(await snapshot(small), before);
      });
      test('a bad key with an over-limit body is 401 invalid_api_key, not 413', async () => {
        const before = await snapshot(small);
        const res = await post(small.sandbox, '/v1/send', {
          key: `ps_test_${'B'.repeat(40)}`,
          raw: sized(LIMIT + 1),
        });
        assertPlainError(res, 401, 'authentication_error', 'invalid_api_key');
        assert.deepEqual(await snapshot(small), before);
      });
      test('no key with an over-limit chunked body is 401 missing_api_key, not 413', async () => {
        const before = await snapshot(small);
        const body = sized(LIMIT + 1);
        const res = await rawPost(small.sandbox, {
          headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
          chunks: [body.slice(0, 1000), body.slice(1000)],
        });
        assertPlainError(res, 401, 'authentication_error', 'missing_api_key');
        assert.deepEqual(await snapshot(small), before);
      });
    });
  });
});
