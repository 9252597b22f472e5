/** A chain and its key, checked to belong together, with the leaf's validity and names read once. */
import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';

export interface CertificatePair {
  cert: Buffer;
  key: Buffer;
  notBefore: number;
  notAfter: number;
  /** subjectAltName's, lower-cased. */
  names: string[];
  /** As `openssl x509 -serial` prints it. */
  serial: string;
}

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----\r?\n[\s\S]*?\r?\n-----END \1-----/g;

export function pemBlocks(text: string): { label: string; pem: string }[] {
  return [...text.matchAll(PEM_BLOCK)].map((m) => ({ label: m[1]!, pem: `${m[0]}\n` }));
}

export class CertificatePairError extends Error {}

export function certificatePair(
  cert: Buffer | string,
  key: Buffer | string,
  source: string,
): CertificatePair {
  const chain = pemBlocks(cert.toString()).filter((b) => b.label === 'CERTIFICATE');
  if (chain.length === 0)
    throw new CertificatePairError(
      `${source}: no PEM certificate (-----BEGIN CERTIFICATE-----) found`,
    );
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(chain[0]!.pem);
  } catch (err) {
    throw new CertificatePairError(
      `${source}: the certificate does not parse (${(err as Error).message})`,
    );
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(key);
  } catch (err) {
    throw new CertificatePairError(
      `${source}: the private key does not parse (${(err as Error).message})`,
    );
  }
  if (!leaf.checkPrivateKey(privateKey))
    throw new CertificatePairError(`${source}: the private key is not the certificate's`);
  return {
    cert: Buffer.from(chain.map((b) => b.pem).join('')),
    key: Buffer.from(key),
    notBefore: Date.parse(leaf.validFrom),
    notAfter: Date.parse(leaf.validTo),
    names: dnsNames(leaf),
    serial: leaf.serialNumber,
  };
}

function dnsNames(leaf: X509Certificate): string[] {
  return (leaf.subjectAltName ?? '')
    .split(', ')
    .filter((entry) => entry.startsWith('DNS:'))
    .map((entry) => entry.slice(4).toLowerCase());
}

/** The key, then the chain: one write replaces both together. */
export function combinedPem(pair: Pick<CertificatePair, 'cert' | 'key'>): string {
  return `${pair.key.toString().trimEnd()}\n${pair.cert.toString().trimEnd()}\n`;
}

export function fromCombinedPem(text: string, source: string): CertificatePair {
  const blocks = pemBlocks(text);
  const key = blocks.find((b) => b.label.endsWith('PRIVATE KEY'));
  if (!key) throw new CertificatePairError(`${source}: no PEM private key found`);
  return certificatePair(
    blocks
      .filter((b) => b.label === 'CERTIFICATE')
      .map((b) => b.pem)
      .join(''),
    key.pem,
    source,
  );
}

export function coversExactly(pair: CertificatePair, domains: readonly string[]): boolean {
  const have = new Set(pair.names);
  return have.size === new Set(domains).size && domains.every((d) => have.has(d.toLowerCase()));
}
