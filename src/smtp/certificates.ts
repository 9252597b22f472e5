import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { generate } from 'selfsigned';
import type { PosternConfig } from '../config/load.js';
import type { Logger } from '../log.js';

export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
  certPath: string;
  keyPath: string;
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
  if (!existsSync(certPath) || !existsSync(keyPath)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const hostname = config.smtp.hostname ?? os.hostname();
    const pems = await generate([{ name: 'commonName', value: hostname }], {
      keySize: 2048,
      notAfterDate: new Date(Date.now() + 825 * 86_400_000),
      algorithm: 'sha256',
      extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: hostname }, { type: 2, value: 'localhost' }, { type: 7, ip: '127.0.0.1' }] }],
    });
    writeFileSync(keyPath, pems.private, { mode: 0o600 });
    writeFileSync(certPath, pems.cert, { mode: 0o644 });
    logger.warn({ cert: certPath }, 'generated a self-signed certificate for the SMTP listeners');
  }
  return { cert: readFileSync(certPath), key: readFileSync(keyPath), certPath, keyPath };
}

/** Re-reads the pair from the same paths (SIGHUP). */
export function reloadTlsMaterial(current: TlsMaterial): TlsMaterial {
  return { ...current, cert: readFileSync(current.certPath), key: readFileSync(current.keyPath) };
}
