import { randomBytes, type ScryptOptions, scrypt, timingSafeEqual } from 'node:crypto';
import { randomAlphanumeric } from '../ids.js';
import { OperatorError } from './errors.js';

/** scrypt, one of OWASP's listed settings (docs/architecture.md#console-api); the stored form names its parameters so they can be raised. */
const PARAMS = { N: 32768, r: 8, p: 3 };
const KEY_BYTES = 32;
const SALT_BYTES = 16;
/** scrypt needs 128 × N × r bytes; Node's default ceiling (32 MiB) is just below that. */
const MAX_MEMORY = 64 * 1024 * 1024;

export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 256;

/** libuv's pool (4 threads) is shared with file I/O: a burst of sign-ins cannot hold up the doors' file work. */
const MAX_CONCURRENT = 2;
let running = 0;
const waiting: (() => void)[] = [];

async function derive(
  password: string,
  salt: Buffer,
  params: ScryptOptions,
  length: number,
): Promise<Buffer> {
  if (running >= MAX_CONCURRENT) await new Promise<void>((resolve) => waiting.push(resolve));
  running++;
  try {
    return await new Promise<Buffer>((resolve, reject) =>
      scrypt(
        password.normalize('NFKC'),
        salt,
        length,
        { ...params, maxmem: MAX_MEMORY },
        (err, key) => (err ? reject(err) : resolve(key)),
      ),
    );
  } finally {
    running--;
    waiting.shift()?.();
  }
}

/** The hash reads all of it. */
export function checkPasswordRules(password: string, field = 'password'): void {
  if (password.length < PASSWORD_MIN_LENGTH)
    throw new OperatorError(
      'invalid_argument',
      `the password must be at least ${PASSWORD_MIN_LENGTH} characters long`,
      field,
    );
  if (password.length > PASSWORD_MAX_LENGTH)
    throw new OperatorError(
      'invalid_argument',
      `the password must be at most ${PASSWORD_MAX_LENGTH} characters long`,
      field,
    );
}

/** 20 alphanumerics, about 119 bits. */
export function generatePassword(): string {
  return randomAlphanumeric(20);
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, PARAMS, KEY_BYTES);
  return `scrypt$${PARAMS.N}$${PARAMS.r}$${PARAMS.p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [N, r, p] = parts.slice(1, 4).map(Number);
  const salt = Buffer.from(parts[4], 'base64');
  const expected = Buffer.from(parts[5], 'base64');
  if (![N, r, p].every(Number.isInteger) || expected.length === 0) return false;
  const actual = await derive(password, salt, { N, r, p }, expected.length);
  return timingSafeEqual(actual, expected);
}

let dummy: Promise<string> | null = null;

/** For an unknown email: the timing does not tell whether the email exists. */
export async function verifyAgainstDummy(password: string): Promise<false> {
  dummy ??= hashPassword(randomAlphanumeric(24));
  await verifyPassword(password, await dummy);
  return false;
}
