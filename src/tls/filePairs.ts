/** Certificates read from files (docs/tls.md); SMTP's falls back to a self-signed pair made in the state directory. SIGHUP re-reads each. */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { generate } from 'selfsigned';
import type { PosternConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import {
  ensurePrivateSubdirectory,
  readOwnFile,
  readPrivateFile,
  writePrivateFile,
} from '../platform/privateFiles.js';
import { certificatePair } from './certificatePair.js';
import { ServedCertificate } from './servedCertificate.js';

export const SMTP_CERTIFICATE_NAME = 'smtp.tls';

interface PairPaths {
  certPath: string;
  keyPath: string;
  inStateDir: boolean;
}

export class FileCertificate {
  constructor(
    readonly certificate: ServedCertificate,
    private readonly paths: PairPaths,
  ) {}

  get certPath(): string {
    return this.paths.certPath;
  }

  get keyPath(): string {
    return this.paths.keyPath;
  }

  /** A pair that does not load changes nothing and throws. */
  reload(): void {
    this.certificate.replace(readPair(this.paths));
  }
}

function readPair(paths: PairPaths) {
  const source = `${paths.certPath} and ${paths.keyPath}`;
  if (paths.inStateDir) {
    const pair = readStatePair(paths);
    if (!pair) throw new Error(`${paths.certPath} or ${paths.keyPath} is gone`);
    return certificatePair(pair.cert, pair.key, source);
  }
  return certificatePair(readFileSync(paths.certPath), readFileSync(paths.keyPath), source);
}

export function listenerCertificate(listener: {
  name: string;
  cert: string | null;
  key: string | null;
}): FileCertificate {
  if (!listener.cert || !listener.key)
    throw new Error(`listener ${listener.name} has no cert and key`);
  const paths = { certPath: listener.cert, keyPath: listener.key, inStateDir: false };
  return new FileCertificate(new ServedCertificate(listener.name, readPair(paths)), paths);
}

export async function smtpCertificate(
  config: Pick<PosternConfig, 'smtp' | 'state_dir'>,
  logger: Logger,
): Promise<FileCertificate> {
  const configured = config.smtp.tls;
  if (configured.cert || configured.key) {
    if (!configured.cert || !configured.key)
      throw new Error('smtp.tls.cert and smtp.tls.key must be set together');
    const paths = { certPath: configured.cert, keyPath: configured.key, inStateDir: false };
    return new FileCertificate(
      new ServedCertificate(SMTP_CERTIFICATE_NAME, readPair(paths)),
      paths,
    );
  }
  const dir = path.join(config.state_dir, 'certs');
  const paths = {
    certPath: path.join(dir, 'postern.crt'),
    keyPath: path.join(dir, 'postern.key'),
    inStateDir: true,
  };
  // The state directory's pair: no link followed, Postern's own files only (privateFiles.ts).
  ensurePrivateSubdirectory(dir);
  if (!readStatePair(paths)) {
    const hostname = config.smtp.hostname ?? os.hostname();
    const pems = await generate([{ name: 'commonName', value: hostname }], {
      keySize: 2048,
      notAfterDate: new Date(Date.now() + 825 * 86_400_000),
      algorithm: 'sha256',
      extensions: [
        {
          name: 'subjectAltName',
          altNames: [
            { type: 2, value: hostname },
            { type: 2, value: 'localhost' },
            { type: 7, ip: '127.0.0.1' },
          ],
        },
      ],
    });
    writePrivateFile(paths.keyPath, pems.private, 0o600);
    writePrivateFile(paths.certPath, pems.cert, 0o644);
    logger.warn(
      { cert: paths.certPath },
      'generated a self-signed certificate for the SMTP listeners',
    );
  }
  return new FileCertificate(new ServedCertificate(SMTP_CERTIFICATE_NAME, readPair(paths)), paths);
}

/** The key tightened to 0600; null when either is missing. */
function readStatePair(paths: {
  certPath: string;
  keyPath: string;
}): { cert: Buffer; key: Buffer } | null {
  const key = readPrivateFile(paths.keyPath);
  // Public (0644), but checked the same way: no link, Postern's own file.
  const cert = readOwnFile(paths.certPath);
  return key && cert ? { cert, key } : null;
}
