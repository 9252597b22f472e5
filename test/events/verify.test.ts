/**
 * The exported verification helper (src/events/verify.ts), checked against signatures made here
 * with node:crypto directly, and against what Postern's own signer produces.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, test } from 'node:test';
import { newWebhookSecret, signatureHeader } from '../../src/events/signing.js';
import {
  checkWebhookSignature,
  parseSignatureHeader,
  verifyWebhookSignature,
} from '../../src/events/verify.js';

const SECRET = 'whsec_3q2vGm8XJfQ0LrTn5kWc7HbYd1PzAe9sUo4iKx6jRlN';
const OLD = 'whsec_oldoldoldoldoldoldoldoldoldoldoldoldoldold';
const NOW = Date.parse('2026-03-02T10:00:00.000Z');
const T = Math.floor(NOW / 1000);
const BODY =
  '{"id":"we.0123456789abcdefghjkmnpq","type":"mail.sent","created_at":"2026-03-02T09:59:59.000Z","data":{"mail":{"uid":"m.x","subject":"Grüße ✓"}}}';

const hmac = (secret: string, t: number, body: string | Buffer) =>
  createHmac('sha256', secret)
    .update(`${t}.`)
    .update(typeof body === 'string' ? Buffer.from(body, 'utf8') : body)
    .digest('hex');

describe('verifyWebhookSignature', () => {
  test('a valid signature, body as string or bytes', () => {
    const header = `t=${T},v1=${hmac(SECRET, T, BODY)}`;
    assert.equal(verifyWebhookSignature(BODY, header, SECRET, { now: NOW }), true);
    assert.equal(
      verifyWebhookSignature(Buffer.from(BODY, 'utf8'), header, [SECRET], { now: NOW }),
      true,
    );
    assert.equal(
      verifyWebhookSignature(new Uint8Array(Buffer.from(BODY, 'utf8')), header, SECRET, {
        now: NOW,
      }),
      true,
    );
    assert.deepEqual(checkWebhookSignature(BODY, header, SECRET, { now: NOW }), {
      ok: true,
      timestamp: T,
    });
  });

  test("agrees with Postern's signer, including two v1 entries during a rotation", () => {
    const secret = newWebhookSecret();
    const body = Buffer.from(BODY, 'utf8');
    const header = signatureHeader(body, T, [secret, OLD]);
    assert.equal(header, `t=${T},v1=${hmac(secret, T, body)},v1=${hmac(OLD, T, body)}`);
    assert.equal(
      verifyWebhookSignature(body, header, secret, { now: NOW }),
      true,
      'a receiver that already has the new secret',
    );
    assert.equal(
      verifyWebhookSignature(body, header, OLD, { now: NOW }),
      true,
      'a receiver that still has the old one',
    );
    assert.equal(verifyWebhookSignature(body, header, [OLD, secret], { now: NOW }), true);
    assert.equal(verifyWebhookSignature(body, header, 'whsec_someoneelse', { now: NOW }), false);
  });

  test('a changed body, a wrong secret, a changed timestamp: mismatch', () => {
    const header = `t=${T},v1=${hmac(SECRET, T, BODY)}`;
    assert.deepEqual(
      checkWebhookSignature(BODY.replace('mail.sent', 'mail.failed'), header, SECRET, { now: NOW }),
      { ok: false, reason: 'signature_mismatch' },
    );
    assert.deepEqual(checkWebhookSignature(`${BODY} `, header, SECRET, { now: NOW }), {
      ok: false,
      reason: 'signature_mismatch',
    });
    assert.deepEqual(checkWebhookSignature(BODY, header, `${SECRET}x`, { now: NOW }), {
      ok: false,
      reason: 'signature_mismatch',
    });
    const shifted = `t=${T + 1},v1=${hmac(SECRET, T, BODY)}`;
    assert.deepEqual(checkWebhookSignature(BODY, shifted, SECRET, { now: NOW }), {
      ok: false,
      reason: 'signature_mismatch',
    });
    // The JSON re-serialised (what a framework's parsed body would give) is not the raw body.
    const reserialised = JSON.stringify(JSON.parse(BODY), null, 1);
    assert.equal(verifyWebhookSignature(reserialised, header, SECRET, { now: NOW }), false);
  });

  test('timestamps beyond the tolerance (5 minutes by default, either way) are refused', () => {
    const at = (t: number) => `t=${t},v1=${hmac(SECRET, t, BODY)}`;
    assert.equal(verifyWebhookSignature(BODY, at(T - 300), SECRET, { now: NOW }), true);
    assert.equal(verifyWebhookSignature(BODY, at(T + 300), SECRET, { now: NOW }), true);
    assert.deepEqual(checkWebhookSignature(BODY, at(T - 301), SECRET, { now: NOW }), {
      ok: false,
      reason: 'stale_timestamp',
    });
    assert.deepEqual(checkWebhookSignature(BODY, at(T + 301), SECRET, { now: NOW }), {
      ok: false,
      reason: 'stale_timestamp',
    });
    assert.equal(
      verifyWebhookSignature(BODY, at(T - 301), SECRET, { now: NOW, toleranceSeconds: 600 }),
      true,
    );
    assert.equal(
      verifyWebhookSignature(BODY, at(T - 11), SECRET, { now: NOW, toleranceSeconds: 10 }),
      false,
    );
    // Without `now`, the real clock.
    const real = Math.floor(Date.now() / 1000);
    assert.equal(verifyWebhookSignature(BODY, at(real), SECRET), true);
    assert.equal(verifyWebhookSignature(BODY, at(real - 3600), SECRET), false);
  });

  test('missing and malformed headers, no secret', () => {
    const sig = hmac(SECRET, T, BODY);
    const reason = (header: string | null | undefined, secrets: string | string[] = SECRET) => {
      const r = checkWebhookSignature(BODY, header, secrets, { now: NOW });
      return r.ok ? 'ok' : r.reason;
    };
    assert.equal(reason(undefined), 'missing_header');
    assert.equal(reason(null), 'missing_header');
    assert.equal(reason(''), 'missing_header');
    assert.equal(reason(`v1=${sig}`), 'malformed_header');
    assert.equal(reason(`t=${T}`), 'malformed_header');
    assert.equal(reason(`t=${T},v1=${sig.slice(0, 63)}`), 'malformed_header');
    assert.equal(reason(`t=${T},v1=${sig}zz`), 'malformed_header');
    assert.equal(reason(`t=abc,v1=${sig}`), 'malformed_header');
    assert.equal(reason(`t=${T},t=${T},v1=${sig}`), 'malformed_header');
    assert.equal(reason(`t=${T};v1=${sig}`), 'malformed_header');
    assert.equal(reason(`t=${T},v1=${sig}`, []), 'no_secret');
    assert.equal(reason(`t=${T},v1=${sig}`, ''), 'no_secret');
    // Spaces after commas, upper-case hex and unknown schemes are tolerated.
    assert.equal(reason(`t=${T}, v0=abc, v1=${sig.toUpperCase()}`), 'ok');
    // A wrong entry next to the right one still verifies (that is what rotation relies on).
    assert.equal(reason(`t=${T},v1=${'0'.repeat(64)},v1=${sig}`), 'ok');
    assert.deepEqual(parseSignatureHeader(`t=${T},v1=${sig},v1=${'a'.repeat(64)}`), {
      timestamp: T,
      signatures: [sig, 'a'.repeat(64)],
    });
  });
});
