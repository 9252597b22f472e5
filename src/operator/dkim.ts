import { readFileSync } from 'node:fs';
import {
  type DkimAlgorithm,
  DkimKeyError,
  type DkimKeyPair,
  dnsName,
  dnsTxtValue,
  generateDkimKeyPair,
  importDkimPrivateKey,
  newDkimKeyId,
} from '../dkim/keys.js';
import { type DkimKeyRow, getDkimKey, listDkimKeys } from '../store/dkimKeys.js';
import { auditStamp } from './audit.js';
import { iso, type OperatorContext } from './context.js';
import { OperatorError } from './errors.js';
import { requireProject } from './projects.js';
import { write } from './writer.js';

/** What an operator sees of a key: the DNS record to publish, never the private key. */
export interface DkimKeyView {
  id: string;
  project_id: string;
  domain: string;
  selector: string;
  algorithm: DkimAlgorithm;
  dns_name: string;
  dns_value: string;
  created_at: string;
}

export interface AddDkimKeyOptions {
  domain: string;
  selector: string;
  /** Path of a PEM private key to import instead of generating one. */
  privateKeyFile?: string;
  /** Or the PEM itself (the console). */
  privateKeyPem?: string;
  /** rsa (default) or ed25519; with a file, must match the file's key. */
  algorithm?: string;
}

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const SELECTOR = /^[a-z0-9][a-z0-9_-]*(?:\.[a-z0-9][a-z0-9_-]*)*$/;

function dkimView(row: DkimKeyRow): DkimKeyView {
  return {
    id: row.id,
    project_id: row.project_id,
    domain: row.domain,
    selector: row.selector,
    algorithm: row.algorithm,
    dns_name: dnsName(row.selector, row.domain),
    dns_value: dnsTxtValue(row.algorithm, row.public_key),
    created_at: iso(row.created_at)!,
  };
}

/** A host name of at least two labels, lower-cased (DNS names compare case-insensitively); `what` names it in the refusal. */
export function hostName(domain: string, what = '--domain'): string {
  const d = domain.toLowerCase();
  const labels = d.split('.');
  if (
    d.length > 253 ||
    labels.length < 2 ||
    !labels.every((l) => LABEL.test(l)) ||
    /^\d+$/.test(labels[labels.length - 1])
  ) {
    throw new OperatorError(
      'invalid_argument',
      `${what} must be a host name such as example.com (got "${domain}")`,
      'domain',
    );
  }
  return d;
}

function checkSelector(selector: string, domain: string): void {
  if (!SELECTOR.test(selector) || selector.split('.').some((l) => l.length > 63)) {
    throw new OperatorError(
      'invalid_argument',
      `--selector must be lower-case DNS labels of letters, digits, "-" and "_" (got "${selector}")`,
      'selector',
    );
  }
  if (dnsName(selector, domain).length > 253)
    throw new OperatorError(
      'invalid_argument',
      `${dnsName(selector, domain)} is longer than 253 characters`,
      'selector',
    );
}

function checkAlgorithm(algorithm: string | undefined): 'rsa' | 'ed25519' | undefined {
  if (algorithm === undefined) return undefined;
  if (algorithm === 'rsa' || algorithm === 'rsa-sha256') return 'rsa';
  if (algorithm === 'ed25519' || algorithm === 'ed25519-sha256') return 'ed25519';
  throw new OperatorError(
    'invalid_argument',
    `--algorithm must be rsa or ed25519 (got "${algorithm}")`,
    'algorithm',
  );
}

function keyFromFile(file: string, kind: 'rsa' | 'ed25519' | undefined): DkimKeyPair {
  let pem: Buffer;
  try {
    pem = readFileSync(file);
  } catch (err) {
    throw new OperatorError(
      'invalid_argument',
      `cannot read --private-key ${file}: ${(err as { code?: string }).code ?? 'error'}`,
      'private_key',
    );
  }
  return keyFromPem(pem, kind, `--private-key ${file}`);
}

function keyFromPem(pem: Buffer, kind: 'rsa' | 'ed25519' | undefined, source: string): DkimKeyPair {
  let pair: DkimKeyPair;
  try {
    pair = importDkimPrivateKey(pem);
  } catch (err) {
    if (err instanceof DkimKeyError)
      throw new OperatorError('invalid_argument', `${source}: ${err.message}`, 'private_key');
    throw err;
  }
  if (kind !== undefined && pair.algorithm !== `${kind}-sha256`) {
    throw new OperatorError(
      'invalid_argument',
      `${source} holds a ${pair.algorithm.split('-')[0]} key, not ${kind}`,
      'private_key',
    );
  }
  return pair;
}

/**
 * Generates (RSA 2048 by default, or Ed25519) or imports a signing key for a project's domain.
 * It becomes the domain's active key; a previous active key for the domain is retired.
 */
export async function addDkimKey(
  ctx: OperatorContext,
  projectId: string,
  opts: AddDkimKeyOptions,
): Promise<DkimKeyView> {
  await requireProject(ctx, projectId);
  const domain = hostName(opts.domain);
  checkSelector(opts.selector, domain);
  const kind = checkAlgorithm(opts.algorithm);
  const pair =
    opts.privateKeyFile !== undefined
      ? keyFromFile(opts.privateKeyFile, kind)
      : opts.privateKeyPem !== undefined
        ? keyFromPem(Buffer.from(opts.privateKeyPem, 'utf8'), kind, 'private_key')
        : generateDkimKeyPair(kind ?? 'rsa');
  const id = newDkimKeyId();
  const row = {
    id,
    project_id: projectId,
    domain,
    selector: opts.selector,
    algorithm: pair.algorithm,
    private_key: pair.privateKey,
    public_key: pair.publicKey,
    created_at: ctx.clock.now(),
  };
  await write(ctx, { type: 'dkim_add', row, stamp: auditStamp(ctx) });
  return dkimView((await getDkimKey(ctx.store, id))!);
}

export async function listDkim(
  ctx: OperatorContext,
  projectId: string,
): Promise<{ keys: DkimKeyView[] }> {
  await requireProject(ctx, projectId);
  return { keys: (await listDkimKeys(ctx.store, projectId)).map(dkimView) };
}

/** Retires a key: messages are no longer signed with it. */
export async function removeDkim(
  ctx: OperatorContext,
  id: string,
): Promise<{ id: string; removed: true }> {
  await write(ctx, { type: 'dkim_remove', id, now: ctx.clock.now(), stamp: auditStamp(ctx) });
  return { id, removed: true };
}
