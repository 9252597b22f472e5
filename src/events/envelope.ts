/** The lifecycle event types the outbox holds (and endpoints subscribe to). */
export const MAIL_EVENT_TYPES = [
  'mail.accepted',
  'mail.sent',
  'mail.delivered',
  'mail.bounced',
  'mail.complained',
  'mail.failed',
  'mail.suppressed',
] as const;

/** Sent by `postern webhook test`; never from the outbox, never with `data.mail`. */
export const TEST_EVENT_TYPE = 'webhook.test';

/**
 * The one envelope of every delivery: `{id, type, created_at, data}` and nothing else. `data` is
 * the event's data exactly as recorded (for mail events it holds `data.mail` plus the
 * type-specific blocks). The bytes returned are the bytes signed and the bytes sent.
 */
export function envelopeBody(
  id: string,
  type: string,
  createdAtMs: number,
  data: string | Record<string, unknown>,
): Buffer {
  const parsed: unknown = typeof data === 'string' ? JSON.parse(data) : data;
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new Error(`event data of ${id} is not a JSON object`);
  return Buffer.from(
    JSON.stringify({ id, type, created_at: new Date(createdAtMs).toISOString(), data: parsed }),
    'utf8',
  );
}
