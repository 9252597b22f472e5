import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { createReadStream, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { dkimSignatureFor } from '../src/dkim/sign.js';
import { addDkimKey, removeDkim, type DkimKeyView } from '../src/operator/dkim.js';
import { createProjectWithKeys, post, runCli, startTestPostern, validMessage, type CliResult, type TestPostern } from './support/postern.js';

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

// ---------------------------------------------------------------------------------------------
// Verifiers.

/** mailauth's verifier, with DNS answered from the record we were given. */
async function mailauthVerify(message: Buffer, dnsName: string, dnsValue: string) {
  const queried: string[] = [];
  const result = await dkimVerify(message, {
    resolver: async (name: string, rrtype: string) => {
      queried.push(`${rrtype} ${name}`);
      if (rrtype === 'TXT' && name === dnsName) return [[dnsValue]];
      throw Object.assign(new Error(`no ${rrtype} record for ${name}`), { code: 'ENOTFOUND' });
    },
  });
  return { result, queried };
}

/** A python3 that can `import dkim` (python3-dkim): the interpreter of `dkimverify`, else the usual ones. */
let python: string | undefined;
function pythonWithDkim(): string {
  if (python) return python;
  const candidates: string[] = [];
  const which = spawnSync('sh', ['-c', 'command -v dkimverify'], { encoding: 'utf8' });
  const dkimverify = which.stdout.trim();
  if (which.status === 0 && dkimverify && existsSync(dkimverify)) {
    const shebang = /^#!\s*(\S+)/.exec(readFileSync(dkimverify, 'utf8').split('\n')[0]);
    if (shebang && !shebang[1].endsWith('/env')) candidates.push(shebang[1]);
  }
  candidates.push('/usr/bin/python3', 'python3');
  python = candidates.find((c) => spawnSync(c, ['-c', 'import dkim'], { stdio: 'ignore' }).status === 0);
  if (python) return python;
  throw new Error('python3-dkim is not installed (apt-get install -y python3-dkim): the independent DKIM verifier is required');
}

/**
 * dkimverify's check (`dkim.verify` of python3-dkim) with the public key supplied instead of DNS.
 * Verifies a batch of messages in one interpreter: input JSON [{message (base64), name, value}],
 * output JSON ["pass" | "fail", ...].
 */
const PY_VERIFY = `
import base64, json, sys, dkim
out = []
for case in json.load(sys.stdin):
    name = case['name'].encode()
    record = case['value'].encode()
    def dnsfunc(qname, timeout=5, name=name, record=record):
        return record if qname.rstrip(b'.').lower() == name else None
    out.append('pass' if dkim.verify(base64.b64decode(case['message']), dnsfunc=dnsfunc) else 'fail')
json.dump(out, sys.stdout)
`;

interface VerifyCase {
  message: Buffer;
  name: string;
  value: string;
}

function pythonVerify(cases: VerifyCase[]): string[] {
  const input = JSON.stringify(cases.map((c) => ({ message: c.message.toString('base64'), name: c.name, value: c.value })));
  const r = spawnSync(pythonWithDkim(), ['-c', PY_VERIFY], { input, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  assert.equal(r.status, 0, `python3-dkim failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as string[];
}

/** The tags of a DKIM-Signature header (unfolded). */
function signatureTags(header: string): Record<string, string> {
  const value = header.replace(/\r\n[ \t]+/g, ' ').replace(/^DKIM-Signature:\s*/i, '').trim();
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
const tempDirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'postern-dkim-'));
  tempDirs.push(dir);
  return dir;
}

before(async () => {
  p = await startTestPostern();
});
after(async () => {
  await p?.close();
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

const row = (id: string): DkimRow => p.ctx.db.prepare('SELECT * FROM dkim_keys WHERE id = ?').get(id) as DkimRow;

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
function assertPrintedKey(printed: any, expected: { project_id: string; domain: string; selector: string; algorithm: string; dns_value: string }, stdout?: string): void {
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
  const stored = row(printed.id);
  const privateBody = stored.private_key.replace(/-----[^-]+-----|\s/g, '');
  assert.equal(text.includes(privateBody.slice(20, 80)), false, 'private key material printed');
}

