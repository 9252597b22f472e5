/**
 * Clients that verify a listener's certificate chain the way real ones do, against a given root
 * only: Python's smtplib (STARTTLS and implicit TLS) and Node's fetch, each in a child process
 * with the root as its only extra trust, reaching the listener under the certificate's name (the
 * name resolved to 127.0.0.1 inside the child), and a TLS handshake in this process that reads
 * which certificate was served.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect, type PeerCertificate } from 'node:tls';

interface ChildResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runChild(
  command: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A file holding `pem`, removed after `use`. */
async function withPemFile<T>(pem: string, use: (file: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(path.join(tmpdir(), 'postern-root-'));
  const file = path.join(dir, 'root.pem');
  writeFileSync(file, pem);
  try {
    return await use(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const PYTHON_SMTP = `
import json, smtplib, socket, ssl, sys
name, port, mode, cafile = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
real = socket.getaddrinfo
socket.getaddrinfo = lambda host, *a, **k: real('127.0.0.1' if host == name else host, *a, **k)
context = ssl.create_default_context(cafile=cafile)
try:
    if mode == 'implicit':
        client = smtplib.SMTP_SSL(name, port, context=context, timeout=30)
    else:
        client = smtplib.SMTP(name, port, timeout=30)
        client.ehlo()
        client.starttls(context=context)
    client.ehlo()
    cert = client.sock.getpeercert()
    print(json.dumps({'ok': True, 'serial': cert['serialNumber'], 'auth': client.has_extn('auth'), 'version': client.sock.version()}))
    client.quit()
except Exception as e:
    print(json.dumps({'ok': False, 'error': type(e).__name__ + ': ' + str(e)}))
`;

export interface PythonSmtpResult {
  ok: boolean;
  /** The served certificate's serial (upper-case hex), when the chain verified. */
  serial?: string;
  /** Whether AUTH was offered once encrypted. */
  auth?: boolean;
  version?: string;
  error?: string;
}

/** Python's smtplib to `name`:`port` (STARTTLS or implicit TLS), trusting `root` only. */
export function pythonSmtp(
  name: string,
  port: number,
  mode: 'starttls' | 'implicit',
  root: string,
): Promise<PythonSmtpResult> {
  return withPemFile(root, async (cafile) => {
    const result = await runChild('python3', ['-c', PYTHON_SMTP, name, String(port), mode, cafile]);
    const line = result.stdout.trim().split('\n').pop() ?? '';
    try {
      return JSON.parse(line) as PythonSmtpResult;
    } catch {
      throw new Error(
        `python3 printed no result (exit ${result.code}): ${result.stdout}${result.stderr}`,
      );
    }
  });
}

const NODE_FETCH = `
import dns from 'node:dns';
const [name, url] = process.argv.slice(1);
const real = dns.lookup;
dns.lookup = function (host, options, callback) {
  return real.call(this, host === name ? '127.0.0.1' : host, options, callback);
};
try {
  const res = await fetch(url, { signal: AbortSignal.timeout(30_000) });
  console.log(JSON.stringify({ ok: true, status: res.status, body: await res.text() }));
} catch (err) {
  console.log(JSON.stringify({ ok: false, error: String(err.cause?.code ?? '') + ' ' + String(err.cause?.message ?? err.message) }));
}
`;

export interface FetchResult {
  ok: boolean;
  status?: number;
  body?: string;
  error?: string;
}

/** Node's fetch of `url` (whose host is `name`) in a child process trusting `root` (NODE_EXTRA_CA_CERTS). */
export function nodeFetch(name: string, url: string, root: string): Promise<FetchResult> {
  return withPemFile(root, async (file) => {
    const result = await runChild(
      process.execPath,
      ['--input-type=module', '-e', NODE_FETCH, name, url],
      { NODE_EXTRA_CA_CERTS: file },
    );
    const line = result.stdout.trim().split('\n').pop() ?? '';
    try {
      return JSON.parse(line) as FetchResult;
    } catch {
      throw new Error(
        `node printed no result (exit ${result.code}): ${result.stdout}${result.stderr}`,
      );
    }
  });
}

/** The certificate a TLS listener on 127.0.0.1:`port` serves under `name`, verified against `root`. */
export function servedCertificate(
  port: number,
  name: string,
  root: string,
): Promise<PeerCertificate> {
  return new Promise((resolve, reject) => {
    const socket = connect(
      { host: '127.0.0.1', port, servername: name, ca: root, ALPNProtocols: ['http/1.1'] },
      () => {
        const cert = socket.getPeerCertificate();
        socket.end();
        resolve(cert);
      },
    );
    socket.setTimeout(30_000, () =>
      socket.destroy(new Error(`no handshake with 127.0.0.1:${port} in 30 s`)),
    );
    socket.on('error', reject);
  });
}
