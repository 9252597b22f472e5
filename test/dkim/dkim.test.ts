import assert from 'node:assert/strict';
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
} from 'node:crypto';
import { createReadStream, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { dkimSignatureFor } from '../../src/dkim/sign.js';
import { addDkimKey, type DkimKeyView, listDkim, removeDkim } from '../../src/operator/dkim.js';
import { OperatorError } from '../../src/operator/errors.js';
import { mailauthVerify, pythonVerify, type VerifyCase } from '../support/dkimVerifiers.js';
import { tempDirs } from '../support/hooks.js';
import {
  type CliResult,
  createProjectWithKeys,
  post,
  runCli,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { storedMimeOf } from '../support/storedMime.js';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const KEY_ID = /^dk\.[0-9abcdefghjkmnpqrstvwxyz]{16}$/;

interface DkimRow {
  id: string;
  project_id: string;
  domain: string;
  selector: string;
  algorithm: string;
  private_key: string;
  public_key: string;
  created_at: number;
  removed_at: number | null;
}

// ---------------------------------------------------------------------------------------------
// Independent expectations: the DNS record computed here from the stored private key, not from
// the code under test.

/** `p=` for an RSA key: the base64 DER SubjectPublicKeyInfo (RFC 6376 §3.6.1). */
function rsaRecord(key: KeyObject): string {
  return `v=DKIM1; k=rsa; p=${createPublicKey(key).export({ type: 'spki', format: 'der' }).toString('base64')}`;
}

/** `p=` for an Ed25519 key: the raw 32-byte public key (RFC 8463 §4.2), taken from its JWK `x`. */
function ed25519Record(key: KeyObject): string {
  const raw = Buffer.from(createPublicKey(key).export({ format: 'jwk' }).x!, 'base64url');
  assert.equal(raw.length, 32);
  return `v=DKIM1; k=ed25519; p=${raw.toString('base64')}`;
}

/** The tags of a DKIM-Signature header (unfolded). */
function signatureTags(header: string): Record<string, string> {
  const value = header
    .replace(/\r\n[ \t]+/g, ' ')
    .replace(/^DKIM-Signature:\s*/i, '')
    .trim();
  const tags: Record<string, string> = {};
  for (const part of value.split(';')) {
    const i = part.indexOf('=');
    if (i < 0) continue;
    tags[part.slice(0, i).trim()] = part.slice(i + 1).replace(/\s+/g, '');
  }
  return tags;
}

// ---------------------------------------------------------------------------------------------

let p: TestPostern;
const tempDir = tempDirs('postern-dkim-');

before(async () => {
  p = await startTestPostern();
});
after(async () => {
  await p?.close();
});

const row = async (id: string): Promise<DkimRow> =>
  (await p.ctx.store.get<DkimRow>('SELECT * FROM dkim_keys WHERE id = ?', id))!;

async function cli(args: string[]): Promise<CliResult> {
  return runCli([...args, '--json'], { POSTERN_STATE_DIR: p.stateDir });
}

/** A successful command: exit 0 and exactly one JSON object on stdout. */
async function ok(args: string[]): Promise<any> {
  const r = await cli(args);
  assert.equal(r.code, 0, `postern ${args.join(' ')} exited ${r.code}: ${r.stdout}${r.stderr}`);
  assert.ok(r.stdout.endsWith('\n') && !r.stdout.slice(0, -1).includes('\n'), r.stdout);
  return r.json;
}

/** A refused command: exit 1 and `{error:{code, message}}`. */
async function refused(args: string[], code: string): Promise<string> {
  const r = await cli(args);
  assert.equal(r.code, 1, `postern ${args.join(' ')} should be refused: ${r.stdout}${r.stderr}`);
  assert.equal(typeof r.json?.error?.message, 'string', r.stdout);
  assert.deepEqual(r.json, { error: { code, message: r.json.error.message } });
  return r.json.error.message as string;
}

/** The printed key is exactly the stored one's DNS record; no private material is printed. */
async function assertPrintedKey(
  printed: any,
  expected: {
    project_id: string;
    domain: string;
    selector: string;
    algorithm: string;
    dns_value: string;
  },
  stdout?: string,
): Promise<void> {
  assert.match(printed.id, KEY_ID);
  assert.match(printed.created_at, ISO);
  assert.deepEqual(printed, {
    id: printed.id,
    project_id: expected.project_id,
    domain: expected.domain,
    selector: expected.selector,
    algorithm: expected.algorithm,
    dns_name: `${expected.selector}._domainkey.${expected.domain}`,
    dns_value: expected.dns_value,
    created_at: printed.created_at,
  });
  const text = stdout ?? JSON.stringify(printed);
  assert.equal(text.includes('PRIVATE'), false);
  const stored = await row(printed.id);
  const privateBody = stored.private_key.replace(/-----[^-]+-----|\s/g, '');
  assert.equal(text.includes(privateBody.slice(20, 80)), false, 'private key material printed');
}

/** An operator function's refusal: OperatorError with that code and a message matching `pattern`. */
async function assertRefusal(
  fn: () => unknown,
  code: string,
  pattern: RegExp,
  what = '',
): Promise<void> {
  await assert.rejects(
    async () => fn(),
    (err: unknown) => {
      assert.ok(err instanceof OperatorError, `${what}: ${String(err)}`);
      assert.equal(err.code, code, `${what}: ${err.message}`);
      assert.match(err.message, pattern, what);
      return true;
    },
  );
}

describe('postern dkim add', () => {
  test('generates an RSA 2048 key by default and prints the DNS TXT record of the stored key, never the private key', async () => {
    const { project } = await createProjectWithKeys(p.ctx, 'dkim rsa');
    const r = await cli([
      'dkim',
      'add',
      '--project',
      project.id,
      '--domain',
      'example.com',
      '--selector',
      's2026',
    ]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const stored = await row(r.json.id);
    const priv = createPrivateKey(stored.private_key);
    assert.equal(priv.asymmetricKeyType, 'rsa');
    assert.equal(priv.asymmetricKeyDetails?.modulusLength, 2048);
    assert.match(stored.private_key, /^-----BEGIN PRIVATE KEY-----\n/); // PKCS#8
    assert.match(stored.public_key, /^-----BEGIN PUBLIC KEY-----\n/); // SPKI
    // The stored public key is the private key's.
    assert.deepEqual(
      createPublicKey(stored.public_key).export({ type: 'spki', format: 'der' }),
      createPublicKey(priv).export({ type: 'spki', format: 'der' }),
    );
    await assertPrintedKey(
      r.json,
      {
        project_id: project.id,
        domain: 'example.com',
        selector: 's2026',
        algorithm: 'rsa-sha256',
        dns_value: rsaRecord(priv),
      },
      r.stdout,
    );
    assert.deepEqual(
      {
        project_id: stored.project_id,
        domain: stored.domain,
        selector: stored.selector,
        algorithm: stored.algorithm,
        removed_at: stored.removed_at,
      },
      {
        project_id: project.id,
        domain: 'example.com',
        selector: 's2026',
        algorithm: 'rsa-sha256',
        removed_at: null,
      },
    );
  });

  test('generates an ed25519 key with --algorithm ed25519: k=ed25519 and the raw 32-byte public key (RFC 8463)', async () => {
    const { project } = await createProjectWithKeys(p.ctx, 'dkim ed25519');
    const r = await cli([
      'dkim',
      'add',
      '--project',
      project.id,
      '--domain',
      'mail.example.org',
      '--selector',
      'ed.2026',
      '--algorithm',
      'ed25519',
    ]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const stored = await row(r.json.id);
    const priv = createPrivateKey(stored.private_key);
    assert.equal(priv.asymmetricKeyType, 'ed25519');
    assert.match(r.json.dns_value, /^v=DKIM1; k=ed25519; p=[A-Za-z0-9+/]{43}=$/);
    await assertPrintedKey(
      r.json,
      {
        project_id: project.id,
        domain: 'mail.example.org',
        selector: 'ed.2026',
        algorithm: 'ed25519-sha256',
        dns_value: ed25519Record(priv),
      },
      r.stdout,
    );
  });

  test('imports an RSA private key from a PEM file (PKCS#1 or PKCS#8) and publishes that very key', async () => {
    const { project } = await createProjectWithKeys(p.ctx, 'dkim import rsa');
    const dir = tempDir();
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const pkcs1 = path.join(dir, 'rsa1.pem');
    writeFileSync(pkcs1, privateKey.export({ type: 'pkcs1', format: 'pem' }), { mode: 0o600 });
    const r = await cli([
      'dkim',
      'add',
      '--project',
      project.id,
      '--domain',
      'example.com',
      '--selector',
      'imported',
      '--private-key',
      pkcs1,
    ]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    await assertPrintedKey(
      r.json,
      {
        project_id: project.id,
        domain: 'example.com',
        selector: 'imported',
        algorithm: 'rsa-sha256',
        dns_value: rsaRecord(privateKey),
      },
      r.stdout,
    );
    // The same key is stored, normalised to PKCS#8.
    const stored = await row(r.json.id);
    assert.match(stored.private_key, /^-----BEGIN PRIVATE KEY-----\n/);
    assert.deepEqual(
      createPrivateKey(stored.private_key).export({ type: 'pkcs8', format: 'der' }),
      privateKey.export({ type: 'pkcs8', format: 'der' }),
    );

    const pkcs8 = path.join(dir, 'rsa8.pem');
    writeFileSync(pkcs8, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    const again = await addDkimKey(p.ctx, project.id, {
      domain: 'example.net',
      selector: 'imported',
      privateKeyFile: pkcs8,
      algorithm: 'rsa',
    });
    assert.equal(again.dns_value, rsaRecord(privateKey));
  });

  test('imports an ed25519 private key from a PEM file', async () => {
    const { project } = await createProjectWithKeys(p.ctx, 'dkim import ed25519');
    const file = path.join(tempDir(), 'ed.pem');
    const { privateKey } = generateKeyPairSync('ed25519');
    writeFileSync(file, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    const r = await cli([
      'dkim',
      'add',
      '--project',
      project.id,
      '--domain',
      'example.com',
      '--selector',
      'ed',
      '--private-key',
      file,
    ]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    await assertPrintedKey(
      r.json,
      {
        project_id: project.id,
        domain: 'example.com',
        selector: 'ed',
        algorithm: 'ed25519-sha256',
        dns_value: ed25519Record(privateKey),
      },
      r.stdout,
    );
  });

  test('refusals exit 1 with {error:{code, message}}: invalid domain, selector, algorithm or key file; unknown project; a missing flag is a usage error', async () => {
    const { project } = await createProjectWithKeys(p.ctx, 'dkim cli refusals');
    const rsaFile = path.join(tempDir(), 'rsa.pem');
    writeFileSync(
      rsaFile,
      generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({
        type: 'pkcs8',
        format: 'pem',
      }),
      { mode: 0o600 },
    );
    const add = (...extra: string[]) => ['dkim', 'add', '--project', project.id, ...extra];
    const [domain, selector, algorithm, mismatch, unknownProject, missing] = await Promise.all([
      refused(add('--domain', 'exa mple.com', '--selector', 's'), 'invalid_argument'),
      refused(add('--domain', 'example.com', '--selector', 'S1'), 'invalid_argument'),
      refused(
        add('--domain', 'example.com', '--selector', 's', '--algorithm', 'dsa'),
        'invalid_argument',
      ),
      refused(
        add(
          '--domain',
          'example.com',
          '--selector',
          's',
          '--algorithm',
          'ed25519',
          '--private-key',
          rsaFile,
        ),
        'invalid_argument',
      ),
      refused(
        ['dkim', 'add', '--project', 'p.nope', '--domain', 'example.com', '--selector', 's'],
        'not_found',
      ),
      cli(add('--domain', 'example.com')),
    ]);
    assert.equal(domain, '--domain must be a host name such as example.com (got "exa mple.com")');
    assert.equal(
      selector,
      '--selector must be lower-case DNS labels of letters, digits, "-" and "_" (got "S1")',
    );
    assert.equal(algorithm, '--algorithm must be rsa or ed25519 (got "dsa")');
    assert.equal(mismatch, `--private-key ${rsaFile} holds a rsa key, not ed25519`);
    assert.equal(unknownProject, 'project p.nope not found');
    assert.equal(missing.code, 2);
    assert.equal(missing.json.error.code, 'usage');
    assert.match(missing.json.error.message, /--selector is required/);
    // Nothing was stored.
    assert.deepEqual(await listDkim(p.ctx, project.id), { keys: [] });
  });
});

describe('dkim add validation (operator)', () => {
  test('refuses key files that are missing, not private keys, encrypted, too-short RSA, another key type, or not the --algorithm', async () => {
    const { project } = await createProjectWithKeys(p.ctx, 'dkim bad files');
    const dir = tempDir();
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const file = (name: string, content?: string | Buffer): string => {
      const f = path.join(dir, name);
      if (content !== undefined) writeFileSync(f, content, { mode: 0o600 });
      return f;
    };
    const cases: [string, RegExp][] = [
      [file('missing.pem'), /cannot read --private-key .*missing\.pem: ENOENT/],
      [dir, /cannot read --private-key .*: EISDIR/],
      [
        file('garbage.pem', 'not a key\n'),
        /garbage\.pem: not a usable unencrypted PEM private key/,
      ],
      [
        file('public.pem', rsa.publicKey.export({ type: 'spki', format: 'pem' })),
        /public\.pem: not a usable unencrypted PEM private key/,
      ],
      [
        file(
          'encrypted.pem',
          rsa.privateKey.export({
            type: 'pkcs8',
            format: 'pem',
            cipher: 'aes-256-cbc',
            passphrase: 'secret',
          }),
        ),
        /encrypted\.pem: not a usable unencrypted PEM private key/,
      ],
      [
        file(
          'short.pem',
          generateKeyPairSync('rsa', { modulusLength: 512 }).privateKey.export({
            type: 'pkcs8',
            format: 'pem',
          }),
        ),
        /short\.pem: RSA key of 512 bits is too short \(at least 1024\)/,
      ],
      [
        file(
          'ec.pem',
          generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey.export({
            type: 'pkcs8',
            format: 'pem',
          }),
        ),
        /ec\.pem: unsupported key type "ec"/,
      ],
    ];
    for (const [f, pattern] of cases) {
      await assertRefusal(
        async () =>
          await addDkimKey(p.ctx, project.id, {
            domain: 'example.com',
            selector: 's',
            privateKeyFile: f,
          }),
        'invalid_argument',
        pattern,
        f,
      );
    }
    const rsaFile = file('rsa.pem', rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const edFile = file(
      'ed.pem',
      generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }),
    );
    await assertRefusal(
      async () =>
        await addDkimKey(p.ctx, project.id, {
          domain: 'example.com',
          selector: 's',
          privateKeyFile: rsaFile,
          algorithm: 'ed25519',
        }),
      'invalid_argument',
      /holds a rsa key, not ed25519/,
    );
    await assertRefusal(
      async () =>
        await addDkimKey(p.ctx, project.id, {
          domain: 'example.com',
          selector: 's',
          privateKeyFile: edFile,
          algorithm: 'rsa',
        }),
      'invalid_argument',
      /holds a ed25519 key, not rsa/,
    );
    assert.deepEqual(await listDkim(p.ctx, project.id), { keys: [] });
  });

  test('the domain must be a host name of at least two labels (stored lower-case); the selector lower-case DNS labels', async () => {
    const { project } = await createProjectWithKeys(p.ctx, 'dkim validation');
    const add =
      (domain: string, selector: string, algorithm = 'ed25519') =>
      async () =>
        await addDkimKey(p.ctx, project.id, { domain, selector, algorithm });
    const badDomains = [
      'example',
      'exa mple.com',
      '-bad.example.com',
      'bad-.example.com',
      'example..com',
      '.example.com',
      'example.com.',
      'ex_ample.com',
      'exämple.com',
      '192.168.0.1',
      `${'a'.repeat(64)}.com`,
      `${'abcdefghi.'.repeat(26)}com`,
      '',
    ];
    for (const domain of badDomains)
      await assertRefusal(
        add(domain, 's'),
        'invalid_argument',
        /^--domain must be a host name/,
        `domain ${JSON.stringify(domain)}`,
      );
    const badSelectors = [
      'S1',
      '-s',
      '_s',
      's..t',
      's.',
      '.s',
      's t',
      's/t',
      's;t',
      's=t',
      '',
      'a'.repeat(64),
    ];
    for (const selector of badSelectors)
      await assertRefusal(
        add('example.com', selector),
        'invalid_argument',
        /^--selector must be/,
        `selector ${JSON.stringify(selector)}`,
      );
    await assertRefusal(
      add('example.com', Array(4).fill('a'.repeat(60)).join('.'), 'ed25519'),
      'invalid_argument',
      /longer than 253 characters/,
    );
    for (const algorithm of ['dsa', 'RSA', 'ed448', ''])
      await assertRefusal(
        add('example.com', 's', algorithm),
        'invalid_argument',
        /^--algorithm must be rsa or ed25519/,
        algorithm,
      );
    await assertRefusal(
      async () => await addDkimKey(p.ctx, 'p.nope', { domain: 'example.com', selector: 's' }),
      'not_found',
      /^project p\.nope not found$/,
    );
    assert.deepEqual(await listDkim(p.ctx, project.id), { keys: [] });

    // Accepted: digits, "-" and "_" in selectors, dotted selectors, xn-- labels; the domain is lower-cased.
    const good = await addDkimKey(p.ctx, project.id, {
      domain: 'Mail.Example.COM',
      selector: '2026-01_a.b9',
      algorithm: 'ed25519',
    });
    assert.equal(good.domain, 'mail.example.com');
    assert.equal(good.dns_name, '2026-01_a.b9._domainkey.mail.example.com');
    assert.equal(
      (
        await addDkimKey(p.ctx, project.id, {
          domain: 'xn--bcher-kva.example',
          selector: 'x',
          algorithm: 'ed25519-sha256',
        })
      ).algorithm,
      'ed25519-sha256',
    );
    assert.equal(
      (
        await addDkimKey(p.ctx, project.id, {
          domain: '1.example',
          selector: 'x',
          algorithm: 'rsa-sha256',
        })
      ).algorithm,
      'rsa-sha256',
    );
  });
});

describe('postern dkim list / replace / remove', () => {
  test('a second key for the same project and domain replaces the active one; other domains and projects keep theirs', async () => {
    const { project } = await createProjectWithKeys(p.ctx, 'dkim replace');
    const other = (await createProjectWithKeys(p.ctx, 'dkim replace other')).project;
    const first = await addDkimKey(p.ctx, project.id, {
      domain: 'example.com',
      selector: 'old',
      algorithm: 'ed25519',
    });
    const keep = await addDkimKey(p.ctx, project.id, {
      domain: 'example.net',
      selector: 'net',
      algorithm: 'ed25519',
    });
    const otherKey = await addDkimKey(p.ctx, other.id, {
      domain: 'example.com',
      selector: 'theirs',
      algorithm: 'ed25519',
    });
    const second = await ok([
      'dkim',
      'add',
      '--project',
      project.id,
      '--domain',
      'example.com',
      '--selector',
      'new',
      '--algorithm',
      'ed25519',
    ]);

    assert.notEqual((await row(first.id)).removed_at, null);
    assert.equal((await row(second.id)).removed_at, null);
    const [mine, theirs] = await Promise.all([
      ok(['dkim', 'list', '--project', project.id]),
      ok(['dkim', 'list', '--project', other.id]),
    ]);
    assert.deepEqual(mine, { keys: [second, keep] });
    assert.deepEqual(theirs, { keys: [otherKey] });
    // The replaced key no longer signs; the new one does.
    const signature = await dkimSignatureFor(
      p.ctx.store,
      project.id,
      'example.com',
      Buffer.from('From: a@example.com\r\nSubject: x\r\n\r\nhi\r\n'),
      new Date(),
    );
    assert.equal(signatureTags(signature!).s, 'new');
  });

  test('list prints the active keys, ordered by domain, with their DNS records and no private key', async () => {
    const { project } = await createProjectWithKeys(p.ctx, 'dkim list');
    const empty = (await createProjectWithKeys(p.ctx, 'dkim list empty')).project;
    const b = await addDkimKey(p.ctx, project.id, { domain: 'b.example', selector: 'x' });
    const a = await addDkimKey(p.ctx, project.id, {
      domain: 'a.example',
      selector: 'y',
      algorithm: 'ed25519',
    });
    const [listed, none, unknown] = await Promise.all([
      cli(['dkim', 'list', '--project', project.id]),
      ok(['dkim', 'list', '--project', empty.id]),
      refused(['dkim', 'list', '--project', 'p.nope'], 'not_found'),
    ]);
    assert.equal(listed.code, 0, listed.stdout + listed.stderr);
    assert.deepEqual(listed.json, { keys: [a, b] });
    assert.equal(listed.stdout.includes('PRIVATE'), false);
    assert.deepEqual(none, { keys: [] });
    assert.equal(unknown, 'project p.nope not found');
  });

  test('remove retires a key (kept in the index, no longer listed or used); removing it again or an unknown id is not_found', async () => {
    const { project } = await createProjectWithKeys(p.ctx, 'dkim remove');
    const key = await addDkimKey(p.ctx, project.id, {
      domain: 'example.com',
      selector: 'gone',
      algorithm: 'ed25519',
    });
    const stays = await addDkimKey(p.ctx, project.id, {
      domain: 'example.org',
      selector: 'stays',
      algorithm: 'ed25519',
    });
    assert.deepEqual(await ok(['dkim', 'remove', key.id]), { id: key.id, removed: true });
    assert.notEqual((await row(key.id)).removed_at, null);
    const [list, again, unknown] = await Promise.all([
      ok(['dkim', 'list', '--project', project.id]),
      refused(['dkim', 'remove', key.id], 'not_found'),
      refused(['dkim', 'remove', 'dk.0000000000000000'], 'not_found'),
    ]);
    assert.deepEqual(list, { keys: [stays] });
    assert.equal(again, `DKIM key ${key.id} not found`);
    assert.equal(unknown, 'DKIM key dk.0000000000000000 not found');
    // A new key for the domain can be added after removal.
    const fresh = await addDkimKey(p.ctx, project.id, {
      domain: 'example.com',
      selector: 'back',
      algorithm: 'ed25519',
    });
    assert.deepEqual(await listDkim(p.ctx, project.id), { keys: [fresh, stays] });
  });
});

describe('DKIM signing of spooled messages', () => {
  /** Sends over HTTP and returns the stored MIME bytes. */
  async function spooled(
    liveKey: string,
    overrides: Record<string, unknown> = {},
  ): Promise<{ id: string; bytes: Buffer }> {
    const res = await post(p.production, '/v1/send', {
      key: liveKey,
      json: validMessage(overrides),
    });
    assert.equal(res.status, 202, res.text);
    return { id: res.body.id, bytes: await storedMimeOf(p.ctx.store, p.stateDir, res.body.id) };
  }

  const rich = {
    from: 'Sender Name <sender@example.com>',
    to: ['rcpt@example.org', 'Second <second@example.org>'],
    cc: 'copy@example.org',
    reply_to: 'replies@example.com',
    subject: 'Grüße — DKIM test',
    text: 'Plain text body\nwith two lines.  Trailing spaces   \n\n\n',
    html: '<p>HTML <b>body</b></p>',
    attachments: [
      { filename: 'note.txt', content: Buffer.from('attached\r\n').toString('base64') },
    ],
  };

  let rsaProject: string;
  let rsaLive: string;
  let rsaKey: DkimKeyView;
  let edProject: string;
  let edLive: string;
  let edKey: DkimKeyView;

  before(async () => {
    const a = await createProjectWithKeys(p.ctx, 'signing rsa');
    rsaProject = a.project.id;
    rsaLive = a.liveKey;
    rsaKey = await addDkimKey(p.ctx, rsaProject, { domain: 'example.com', selector: 'rsa2026' });
    const b = await createProjectWithKeys(p.ctx, 'signing ed25519');
    edProject = b.project.id;
    edLive = b.liveKey;
    edKey = await addDkimKey(p.ctx, edProject, {
      domain: 'example.com',
      selector: 'ed2026',
      algorithm: 'ed25519',
    });
  });

  for (const kind of ['rsa', 'ed25519'] as const) {
    test(`an ${kind} signature of a spooled message verifies with mailauth and with python3-dkim (dkimverify); tampering fails both`, async () => {
      const [projectId, live, key] =
        kind === 'rsa' ? [rsaProject, rsaLive, rsaKey] : [edProject, edLive, edKey];
      const { bytes } = await spooled(live, rich);
      const header = await dkimSignatureFor(
        p.ctx.store,
        projectId,
        'example.com',
        bytes,
        new Date(),
      );
      assert.ok(header, 'a signature');
      assert.match(header, /^DKIM-Signature: /);
      assert.ok(header.endsWith('\r\n'));
      assert.equal(header.match(/^DKIM-Signature:/gim)?.length, 1);
      const tags = signatureTags(header);
      assert.equal(tags.v, '1');
      assert.equal(tags.a, kind === 'rsa' ? 'rsa-sha256' : 'ed25519-sha256');
      assert.equal(tags.c, 'relaxed/relaxed');
      assert.equal(tags.d, 'example.com');
      assert.equal(tags.s, key.selector);
      assert.deepEqual(tags.h.toLowerCase().split(':').sort(), [
        'cc',
        'content-type',
        'date',
        'from',
        'message-id',
        'mime-version',
        'reply-to',
        'subject',
        'to',
      ]);

      const signed = Buffer.concat([Buffer.from(header), bytes]);
      const { result, queried } = await mailauthVerify(signed, key.dns_name, key.dns_value);
      assert.deepEqual(queried, [`TXT ${key.selector}._domainkey.example.com`]);
      assert.equal(result.results.length, 1);
      const r = result.results[0];
      assert.equal(r.status.result, 'pass', r.info);
      assert.equal(r.signingDomain, 'example.com');
      assert.equal(r.selector, key.selector);
      // mailauth reports the algorithm as `algo` (its .d.ts says `algorithm`).
      assert.equal((r as unknown as { algo: string }).algo, tags.a);
      assert.equal(r.status.aligned, 'example.com');

      // Negative controls: a changed header or body, or another key, fails both verifiers.
      const tamperedHeader = Buffer.from(
        signed.toString('latin1').replace(/^Subject: .*$/m, 'Subject: changed'),
        'latin1',
      );
      const tamperedBody = Buffer.from(
        signed.toString('latin1').replace('Plain text body', 'Plain text b0dy'),
        'latin1',
      );
      assert.notDeepEqual(tamperedHeader, signed);
      assert.notDeepEqual(tamperedBody, signed);
      const headerResult = (await mailauthVerify(tamperedHeader, key.dns_name, key.dns_value))
        .result.results[0];
      assert.equal(headerResult.status.result, 'fail', headerResult.info);
      // mailauth reports a body hash mismatch as neutral (RFC 6376 §6.3 step 7: PERMFAIL, body hash).
      const bodyResult = (await mailauthVerify(tamperedBody, key.dns_name, key.dns_value)).result
        .results[0];
      assert.deepEqual(
        [bodyResult.status.result, bodyResult.status.comment],
        ['neutral', 'body hash did not verify'],
      );
      const wrongKey =
        kind === 'rsa'
          ? rsaRecord(generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey)
          : ed25519Record(generateKeyPairSync('ed25519').privateKey);
      assert.equal(
        (await mailauthVerify(signed, key.dns_name, wrongKey)).result.results[0].status.result,
        'fail',
      );

      const name = key.dns_name;
      assert.deepEqual(
        pythonVerify([
          { message: signed, name, value: key.dns_value },
          { message: tamperedHeader, name, value: key.dns_value },
          { message: tamperedBody, name, value: key.dns_value },
          { message: signed, name, value: wrongKey },
        ]),
        ['pass', 'fail', 'fail', 'fail'],
      );
    });
  }

  test('signs a message given as a stream (a spool file) exactly as the same bytes', async () => {
    const { bytes } = await spooled(rsaLive, { ...rich, subject: 'streamed' });
    // In uneven chunks, as a file stream may cut it: inside the header block and inside a line.
    const chunks = [bytes.subarray(0, 17), bytes.subarray(17, 700), bytes.subarray(700)];
    const header = await dkimSignatureFor(
      p.ctx.store,
      rsaProject,
      'example.com',
      Readable.from(chunks, { objectMode: false }),
      new Date(),
    );
    assert.ok(header);
    const signed = Buffer.concat([Buffer.from(header), bytes]);
    assert.equal(
      (await mailauthVerify(signed, rsaKey.dns_name, rsaKey.dns_value)).result.results[0].status
        .result,
      'pass',
    );
    assert.deepEqual(
      pythonVerify([{ message: signed, name: rsaKey.dns_name, value: rsaKey.dns_value }]),
      ['pass'],
    );
  });

  test('t= is the sign time given (the scheduler passes its clock), however the wall clock moves while signing', async () => {
    const { bytes } = await spooled(edLive, { ...rich, subject: 'sign time' });
    const signTime = new Date(Date.UTC(2026, 0, 1, 12, 0, 0));
    const realNow = Date.now;
    let reads = 0;
    // Each read of the wall clock while signing is a second after the one before. mailauth read
    // it twice when no time was given (signed header, emitted header), so a signature that
    // straddled a second carried a t= it had not signed.
    Date.now = () => realNow() + 1000 * reads++;
    let header: string | null;
    try {
      header = await dkimSignatureFor(p.ctx.store, edProject, 'example.com', bytes, signTime);
    } finally {
      Date.now = realNow;
    }
    assert.ok(header);
    assert.equal(signatureTags(header).t, String(signTime.getTime() / 1000));
    const signed = Buffer.concat([Buffer.from(header), bytes]);
    assert.equal(
      (await mailauthVerify(signed, edKey.dns_name, edKey.dns_value)).result.results[0].status
        .result,
      'pass',
    );
    assert.deepEqual(
      pythonVerify([{ message: signed, name: edKey.dns_name, value: edKey.dns_value }]),
      ['pass'],
    );
  });

  test('a header with a UTF-8 byte that relaxed canonicalisation would fold (à is C3 A0) is signed simple/relaxed, from a buffer or a stream; both verifiers pass', async () => {
    const message = (subject: string) =>
      Buffer.from(
        `From: Sender <sender@example.com>\r\nTo: rcpt@example.org\r\nSubject: ${subject}\r\nDate: Thu, 01 Jan 2026 00:00:00 +0000\r\n` +
          'Message-ID: <eight.bit@example.com>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\nDéjà vu.\r\n',
        'utf8',
      );
    const voila = message('Voilà, déjà vu');
    const file = path.join(tempDir(), 'eight-bit.eml');
    writeFileSync(file, voila);
    // The stream arrives 7 bytes at a time: the header block is found across chunks.
    const cases: [string, Buffer, Buffer | ReturnType<typeof createReadStream>, string][] = [
      ['buffer with à', voila, voila, 'simple/relaxed'],
      ['stream with à', voila, createReadStream(file, { highWaterMark: 7 }), 'simple/relaxed'],
      // é and è (C3 A9, C3 A8) are folded by neither: relaxed stays.
      ['buffer with é and è', message('Café crème'), message('Café crème'), 'relaxed/relaxed'],
      ['ASCII', message('Deja vu'), message('Deja vu'), 'relaxed/relaxed'],
    ];
    const toVerify: VerifyCase[] = [];
    for (const [label, bytes, input, canonicalization] of cases) {
      const header = await dkimSignatureFor(
        p.ctx.store,
        rsaProject,
        'example.com',
        input,
        new Date(),
      );
      assert.ok(header, label);
      assert.equal(signatureTags(header).c, canonicalization, label);
      const signed = Buffer.concat([Buffer.from(header), bytes]);
      assert.equal(
        (await mailauthVerify(signed, rsaKey.dns_name, rsaKey.dns_value)).result.results[0].status
          .result,
        'pass',
        label,
      );
      toVerify.push({ message: signed, name: rsaKey.dns_name, value: rsaKey.dns_value });
    }
    assert.deepEqual(pythonVerify(toVerify), ['pass', 'pass', 'pass', 'pass']);
  });

  test('a sender at a subdomain is signed with the nearest parent domain that has a key (d= that domain)', async () => {
    const { project, liveKey } = await createProjectWithKeys(p.ctx, 'signing parents');
    const apex = await addDkimKey(p.ctx, project.id, { domain: 'example.com', selector: 'apex' });
    const mid = await addDkimKey(p.ctx, project.id, {
      domain: 'b.example.com',
      selector: 'mid',
      algorithm: 'ed25519',
    });

    const cases: [string, DkimKeyView][] = [
      ['news@a.b.example.com', mid],
      ['news@b.example.com', mid],
      ['news@c.example.com', apex],
      ['news@Deep.Sub.EXAMPLE.com', apex],
    ];
    const toVerify: VerifyCase[] = [];
    for (const [from, key] of cases) {
      const { bytes } = await spooled(liveKey, { from, subject: `from ${from}` });
      const header = await dkimSignatureFor(
        p.ctx.store,
        project.id,
        from.split('@')[1],
        bytes,
        new Date(),
      );
      assert.ok(header, from);
      assert.equal(signatureTags(header).d, key.domain, from);
      assert.equal(signatureTags(header).s, key.selector, from);
      const signed = Buffer.concat([Buffer.from(header), bytes]);
      const { result } = await mailauthVerify(signed, key.dns_name, key.dns_value);
      assert.equal(result.results[0].status.result, 'pass', from);
      toVerify.push({ message: signed, name: key.dns_name, value: key.dns_value });
    }
    assert.deepEqual(pythonVerify(toVerify), ['pass', 'pass', 'pass', 'pass']);
  });

  test('no signature (null) when no key of the project applies to the From domain', async () => {
    const { project, liveKey } = await createProjectWithKeys(p.ctx, 'signing none');
    await addDkimKey(p.ctx, project.id, {
      domain: 'sub.example.com',
      selector: 'sub',
      algorithm: 'ed25519',
    });
    const { bytes } = await spooled(liveKey, { from: 'a@other.org' });
    assert.equal(
      await dkimSignatureFor(p.ctx.store, project.id, 'other.org', bytes, new Date()),
      null,
    );
    // A key for a subdomain never signs its parent or a sibling; a bare TLD never matches.
    assert.equal(
      await dkimSignatureFor(p.ctx.store, project.id, 'example.com', bytes, new Date()),
      null,
    );
    assert.equal(
      await dkimSignatureFor(p.ctx.store, project.id, 'other.example.com', bytes, new Date()),
      null,
    );
    assert.equal(await dkimSignatureFor(p.ctx.store, project.id, 'com', bytes, new Date()), null);
    // Another project's key never applies.
    const bare = await createProjectWithKeys(p.ctx, 'signing none bare');
    const fromRsaDomain = await spooled(bare.liveKey, { from: 'a@example.com' });
    assert.equal(
      await dkimSignatureFor(
        p.ctx.store,
        bare.project.id,
        'example.com',
        fromRsaDomain.bytes,
        new Date(),
      ),
      null,
    );
    // A removed key no longer signs.
    const gone = await addDkimKey(p.ctx, project.id, {
      domain: 'other.org',
      selector: 'gone',
      algorithm: 'ed25519',
    });
    assert.ok(await dkimSignatureFor(p.ctx.store, project.id, 'other.org', bytes, new Date()));
    await removeDkim(p.ctx, gone.id);
    assert.equal(
      await dkimSignatureFor(p.ctx.store, project.id, 'other.org', bytes, new Date()),
      null,
    );
  });

  test('a key added with the CLI signs messages that verify against the DNS record the CLI printed', async () => {
    const { project, liveKey } = await createProjectWithKeys(p.ctx, 'signing cli');
    const printed = await ok([
      'dkim',
      'add',
      '--project',
      project.id,
      '--domain',
      'example.com',
      '--selector',
      'cli',
    ]);
    const { bytes } = await spooled(liveKey, rich);
    const header = await dkimSignatureFor(
      p.ctx.store,
      project.id,
      'example.com',
      bytes,
      new Date(),
    );
    assert.ok(header);
    const signed = Buffer.concat([Buffer.from(header), bytes]);
    assert.equal(
      (await mailauthVerify(signed, printed.dns_name, printed.dns_value)).result.results[0].status
        .result,
      'pass',
    );
    assert.deepEqual(
      pythonVerify([{ message: signed, name: printed.dns_name, value: printed.dns_value }]),
      ['pass'],
    );
  });
});
