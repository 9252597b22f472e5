/**
 * Public viewer links: `{base}/view/{m.id}/{token}`, the token an expiry and an HMAC of the id
 * and that expiry under the state directory's viewer key. Nothing is stored per link: a link
 * is valid while its signature checks and its expiry is ahead.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { PosternConfig } from '../config/load.js';
import { OperatorError } from '../operator/errors.js';

const TOKEN = /^([0-9a-z]{1,10})\.([A-Za-z0-9_-]{43})$/;

function signature(secret: Buffer, messageId: string, expiresSec: number): Buffer {
  return createHmac('sha256', secret).update(`postern-view\0${messageId}\0${expiresSec}`).digest();
}

/** The token for `messageId` valid until `expiresAtMs` (rounded down to the second). */
export function viewerToken(secret: Buffer, messageId: string, expiresAtMs: number): string {
  const expiresSec = Math.floor(expiresAtMs / 1000);
  return `${expiresSec.toString(36)}.${signature(secret, messageId, expiresSec).toString('base64url')}`;
}

/** Whether `token` was made for `messageId` under `secret` and has not expired at `nowMs`. */
export function viewerTokenValid(secret: Buffer, messageId: string, token: string, nowMs: number): boolean {
  const m = TOKEN.exec(token);
  if (!m) return false;
  const expiresSec = parseInt(m[1], 36);
  const given = Buffer.from(m[2], 'base64url');
  const expected = signature(secret, messageId, expiresSec);
  // Signature first, in constant time; the expiry only of a genuine token.
  return given.length === expected.length && timingSafeEqual(given, expected) && expiresSec * 1000 > nowMs;
}

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };

/** `7d`, `12h`, `30m`, `90s`, `2w` (or plain seconds) as seconds; null when it is none of those. */
export function durationSeconds(text: string): number | null {
  const m = /^(\d{1,9})([smhdw]?)$/.exec(text.trim());
  if (!m) return null;
  return Number(m[1]) * UNITS[m[2] || 's'];
}

/** Where links point: `viewer.base_url`, else the first production HTTP listener as configured. */
export function configuredViewerBase(config: PosternConfig): string | null {
  if (config.viewer.base_url) return config.viewer.base_url;
  const door = config.listeners.find((l) => l.protocol === 'http' && l.environment === 'production') ?? config.listeners.find((l) => l.protocol === 'http');
  if (!door) return null;
  const host = door.host === '0.0.0.0' ? '127.0.0.1' : door.host === '::' ? '[::1]' : door.host.includes(':') ? `[${door.host}]` : door.host;
  return `http://${host}:${door.port}`;
}

export interface ViewerLink {
  url: string;
  expires_at: string;
}

/**
 * A link to one message valid for `expiresInSeconds` (the configured default when absent,
 * at most `viewer.max_link_expiry_seconds`).
 */
export function viewerLink(config: PosternConfig, secret: Buffer, base: string, messageId: string, nowMs: number, expiresInSeconds?: number): ViewerLink {
  const seconds = expiresInSeconds ?? config.viewer.link_expiry_seconds;
  const max = config.viewer.max_link_expiry_seconds;
  if (!Number.isInteger(seconds) || seconds < 60 || seconds > max) {
    throw new OperatorError('invalid_argument', `the expiry must be from 60 seconds to ${max} seconds (viewer.max_link_expiry_seconds)`, 'expires_in_seconds', 'out_of_range');
  }
  const expiresAtMs = Math.floor((nowMs + seconds * 1000) / 1000) * 1000;
  const url = `${base.replace(/\/+$/, '')}/view/${encodeURIComponent(messageId)}/${viewerToken(secret, messageId, expiresAtMs)}`;
  return { url, expires_at: new Date(expiresAtMs).toISOString() };
}
