/**
 * Two independent DKIM verifiers for the suites: mailauth's, and python3-dkim's (dkimverify's
 * `dkim.verify`), each with DNS answered from the TXT record a test was given (by the CLI, the
 * console API, or the web console's page), never from the network.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';

/** mailauth's verifier, with DNS answered from the record we were given. */
export async function mailauthVerify(message: Buffer, dnsName: string, dnsValue: string) {
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
  python = candidates.find(
    (c) => spawnSync(c, ['-c', 'import dkim'], { stdio: 'ignore' }).status === 0,
  );
  if (python) return python;
  throw new Error(
    'python3-dkim is not installed (apt-get install -y python3-dkim): the independent DKIM verifier is required',
  );
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

export interface VerifyCase {
  message: Buffer;
  name: string;
  value: string;
}

export function pythonVerify(cases: VerifyCase[]): string[] {
  const input = JSON.stringify(
    cases.map((c) => ({ message: c.message.toString('base64'), name: c.name, value: c.value })),
  );
  const r = spawnSync(pythonWithDkim(), ['-c', PY_VERIFY], {
    input,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  assert.equal(r.status, 0, `python3-dkim failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as string[];
}
