/**
 * The three Address forms of the contract: `email`, `Name <email>` (name optionally
 * double-quoted) and `{email, name?}`. One parser serves validation and composition.
 */
export interface Mailbox {
  email: string;
  name?: string;
}

// The same address grammar as ajv-formats' "email" format (fast mode), so both forms agree.
const EMAIL =
  /^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/i;
const NAME_ADDR = /^(?:"((?:[^"\\\r\n]|\\[^\r\n])*)"|([^"<>\r\n]*?))\s*<([^<>\s]*)>$/;

export function isEmail(value: string): boolean {
  return value.length <= 254 && EMAIL.test(value);
}

/** Parses the string form; null when it is not a valid mailbox (CR/LF anywhere is invalid). */
export function parseMailbox(value: string): Mailbox | null {
  if (/[\r\n]/.test(value)) return null;
  const trimmed = value.trim();
  if (isEmail(trimmed)) return { email: trimmed };
  const m = NAME_ADDR.exec(trimmed);
  if (!m) return null;
  const email = m[3];
  if (!isEmail(email)) return null;
  const name = m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : m[2].trim();
  return name === '' ? { email } : { email, name };
}

/** Normalises any valid Address form (already schema-checked) to a Mailbox. */
export function toMailbox(address: string | { email: string; name?: string | null }): Mailbox {
  if (typeof address === 'string') {
    const parsed = parseMailbox(address);
    if (!parsed) throw new Error('toMailbox called with an unvalidated address');
    return parsed;
  }
  return address.name ? { email: address.email, name: address.name } : { email: address.email };
}

export function domainOf(email: string): string {
  return email.slice(email.lastIndexOf('@') + 1).toLowerCase();
}
