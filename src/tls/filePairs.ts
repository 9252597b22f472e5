import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { generate } from 'selfsigned';
import type { PosternConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import { ensurePrivateSubdirectory, readOwnFile, readPrivateFile, writePrivateFile } from '../platform/privateFiles.js';

export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
  certPath: string;
  keyPath: string;
  /** The state directory's self-signed pair (read with its checks), not one the config names. */
  inStateDir?: boolean;
}

/**
 * The SMTP listeners' certificate: the configured pair, else `<state_dir>/certs/postern.{crt,key}`,
 * generated self-signed on first start (clients relaying to a private gateway commonly pin or
 * skip verification; replace it with a real pair in the config for anything public).
 */
export async function loadTlsMaterial(config: PosternConfig, logger: Logger): Promise<TlsMaterial> {
  const configured = config.smtp.tls;
  if (configured.cert || configured.key) {
    if (!configured.cert || !configured.key) throw new Error('smtp.tls.cert and smtp.tls.key must be set together');
    return { cert: readFileSync(configured.cert), key: readFileSync(configured.key), certPath: configured.cert, keyPath: configured.key };
  }
  const dir = path.join(config.state_dir, 'certs');
  const certPath = path.join(dir, 'postern.crt');
  const keyPath = path.join(dir, 'postern.key');
  // The state directory's pair: no link followed, Postern's own files only (privateFiles.ts).
  ensurePrivateSubdirectory(dir);
  let existing = readStatePair({ certPath, keyPath });
  if (!existing) {
    const hostname = config.smtp.hostname ?? os.hostname();
    const pems = await generate([{ name: 'commonName', value: hostname }], {
      keySize: 2048,
      notAfterDate: new Date(Date.now() + 825 * 86_400_000),
      algorithm: 'sha256',
      extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: hostname }, { type: 2, value: 'localhost' }, { type: 7, ip: '127.0.0.1' }] }],
    });
    writePrivateFile(keyPath, pems.private, 0o600);
    writePrivateFile(certPath, pems.cert, 0o644);
    logger.warn({ cert: certPath }, 'generated a self-signed certificate for the SMTP listeners');
    existing = { cert: Buffer.from(pems.cert), key: Buffer.from(pems.private) };
  }
  return { ...existing, certPath, keyPath, inStateDir: true };
}

/** The state directory's pair, checked (the key tightened to 0600); null when either is missing. */
function readStatePair(paths: { certPath: string; keyPath: string }): { cert: Buffer; key: Buffer } | null {
  const key = readPrivateFile(paths.keyPath);
  // The certificate is public (0644), but checked the same way: no link, Postern's own file.
  const cert = readOwnFile(paths.certPath);
  return key && cert ? { cert, key } : null;
}

/** Re-reads the pair from the same paths (SIGHUP). */
export function reloadTlsMaterial(current: TlsMaterial): TlsMaterial {
  if (current.inStateDir) {
    const pair = readStatePair(current);
    if (!pair) throw new Error(`${current.certPath} or ${current.keyPath} is gone`);
    return { ...current, ...pair };
  }
  return { ...current, cert: readFileSync(current.certPath), key: readFileSync(current.keyPath) };
}
