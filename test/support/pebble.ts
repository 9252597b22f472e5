/**
 * Pebble, Let's Encrypt's ACME test server (Debian package `pebble`), for tls.acme's tests:
 * `pebble-challtestsrv` as its DNS (every name resolves to 127.0.0.1), and Pebble told to
 * validate http-01 and tls-alpn-01 on the ports the test's Postern listens on. Both run on free
 * loopback ports, with a config and an HTTPS pair the test writes, without Pebble's random sleeps
 * and nonce rejections (deterministic), and without reusing authorizations (every order answers
 * its challenges). Killed when the test process exits, however it exits.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { generate } from 'selfsigned';
import { onProcessExit } from './privatePostgres.js';

export const PEBBLE = '/usr/bin/pebble';
export const CHALLTESTSRV = '/usr/bin/pebble-challtestsrv';

/** Why the ACME tests cannot run here, or false. */
export function pebbleUnavailable(): string | false {
  if (!existsSync(PEBBLE) || !existsSync(CHALLTESTSRV))
    return `no ${PEBBLE} / ${CHALLTESTSRV} (Debian package pebble; \`npm test\` installs it as root)`;
  return false;
}

export async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const address = probe.address();
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

export interface TestPebble {
  directoryUrl: string;
  /** A PEM file trusting Pebble's own HTTPS (for tls.acme.directory_ca). */
  directoryCaFile: string;
  /** The root Pebble issues under now (its management interface): regenerated at every start. */
  root(): Promise<string>;
  /** Stops Pebble (the CA is down); its DNS keeps running. */
  stop(): Promise<void>;
  /** Starts Pebble again, on the same ports (with a new root). */
  start(): Promise<void>;
  close(): Promise<void>;
}

/** Pebble validating http-01 on 127.0.0.1:`httpPort` and tls-alpn-01 on 127.0.0.1:`tlsPort`. */
export async function startPebble(opts: {
  httpPort: number;
  tlsPort: number;
  validitySeconds?: number;
}): Promise<TestPebble> {
  const dir = mkdtempSync(path.join(tmpdir(), 'postern-pebble-'));
  const pems = await generate([{ name: 'commonName', value: 'pebble' }], {
    keySize: 2048,
    algorithm: 'sha256',
    extensions: [
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
        ],
      },
    ],
  });
  const certFile = path.join(dir, 'pebble.crt');
  writeFileSync(certFile, pems.cert);
  writeFileSync(path.join(dir, 'pebble.key'), pems.private);
  const [acmePort, managementPort, dnsPort, dnsManagementPort] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  writeFileSync(
    path.join(dir, 'pebble.json'),
    JSON.stringify({
      pebble: {
        listenAddress: `127.0.0.1:${acmePort}`,
        managementListenAddress: `127.0.0.1:${managementPort}`,
        certificate: certFile,
        privateKey: path.join(dir, 'pebble.key'),
        httpPort: opts.httpPort,
        tlsPort: opts.tlsPort,
        ocspResponderURL: '',
        externalAccountBindingRequired: false,
        certificateValidityPeriod: opts.validitySeconds ?? 90 * 86_400,
      },
    }),
  );
  const children = new Set<ChildProcess>();
  const run = (program: string, args: string[], env: Record<string, string> = {}) => {
    const child = spawn(program, args, {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let output = '';
    child.stderr!.on('data', (d) => (output = (output + d).slice(-4000)));
    children.add(child);
    child.once('exit', () => children.delete(child));
    return { child, output: () => output };
  };
  const cancelExit = onProcessExit(() => {
    for (const child of children) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  run(CHALLTESTSRV, [
    '-dns01',
    `127.0.0.1:${dnsPort}`,
    '-http01',
    '',
    '-https01',
    '',
    '-tlsalpn01',
    '',
    '-management',
    `127.0.0.1:${dnsManagementPort}`,
    '-defaultIPv4',
    '127.0.0.1',
    '-defaultIPv6',
    '',
  ]);
  let pebble: ReturnType<typeof run> | null = null;
  const get = (url: string) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(url, { ca: pems.cert, timeout: 5000 }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('timeout', () => req.destroy(new Error(`no answer from ${url}`)));
      req.on('error', reject);
      req.end();
    });
  const directoryUrl = `https://127.0.0.1:${acmePort}/dir`;
  const start = async () => {
    pebble = run(
      PEBBLE,
      [
        '-config',
        path.join(dir, 'pebble.json'),
        '-dnsserver',
        `127.0.0.1:${dnsPort}`,
        '-strict=false',
      ],
      {
        PEBBLE_VA_NOSLEEP: '1',
        PEBBLE_WFE_NONCEREJECT: '0',
        PEBBLE_AUTHZREUSE: '0',
      },
    );
    const started = pebble;
    // Pebble makes its root and intermediate keys first: a few seconds on a busy machine.
    for (let i = 0; ; i++) {
      if (started.child.exitCode !== null)
        throw new Error(`pebble exited ${started.child.exitCode}: ${started.output()}`);
      try {
        if ((await get(directoryUrl)).status === 200) return;
      } catch {
        // not listening yet
      }
      if (i > 600)
        throw new Error(
          `pebble did not answer ${directoryUrl} within a minute: ${started.output()}`,
        );
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const stop = async () => {
    const running = pebble;
    pebble = null;
    if (!running || running.child.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      running.child.once('exit', () => resolve());
      running.child.kill('SIGTERM');
    });
  };
  await start();
  return {
    directoryUrl,
    directoryCaFile: certFile,
    async root() {
      const answer = await get(`https://127.0.0.1:${managementPort}/roots/0`);
      if (answer.status !== 200) throw new Error(`pebble's root: ${answer.status}`);
      return answer.body;
    },
    stop,
    start,
    async close() {
      await stop();
      for (const child of children) child.kill('SIGKILL');
      cancelExit();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
