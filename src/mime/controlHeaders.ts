/** `X-Service-*` control headers: the contract features SMTP has no verb for, turned into Message fields (docs/smtp.md#control-headers). */
export const CONTROL_HEADERS = [
  'x-service-tags',
  'x-service-metadata',
  'x-service-category',
  'x-service-scheduled-at',
  'x-service-paused',
  'x-service-provider',
  'x-service-strategy',
  'x-service-idempotency-key',
] as const;

export type ControlHeader = (typeof CONTROL_HEADERS)[number];

export interface ControlFields {
  body: Record<string, unknown>;
  idempotencyKey: string | null;
  /** Problems found reading the headers themselves. */
  details: { field: string; code: string }[];
}

const list = (value: string) =>
  value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');

/** As the send API's shape limit: the rules walk a value recursively, and 20,000 brackets overflowed the stack (a 451 for the sender's mistake). */
const MAX_METADATA_DEPTH = 32;

/** Brackets inside strings not counted. */
function nestsDeeperThan(json: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

const DUPLICATE_CODES: Record<ControlHeader, { field: string; code: string }> = {
  'x-service-tags': { field: 'tags', code: 'tags:invalid_value' },
  'x-service-metadata': { field: 'metadata', code: 'metadata:invalid_value' },
  'x-service-category': { field: 'category', code: 'category:invalid_value' },
  'x-service-scheduled-at': { field: 'scheduled_at', code: 'scheduled_at:invalid_value' },
  'x-service-paused': { field: 'paused', code: 'paused:invalid_value' },
  'x-service-provider': { field: 'routing.provider', code: 'routing:invalid_value' },
  'x-service-strategy': { field: 'routing.strategy', code: 'routing:invalid_value' },
  'x-service-idempotency-key': { field: 'idempotency_key', code: 'idempotency_key:invalid' },
};

export function readControlHeaders(
  values: Map<ControlHeader, string>,
  unknown: string[],
  duplicates: ControlHeader[] = [],
): ControlFields {
  const body: Record<string, unknown> = {};
  const details: { field: string; code: string }[] = duplicates.map(
    (header) => DUPLICATE_CODES[header],
  );
  const tags = values.get('x-service-tags');
  if (tags !== undefined) body.tags = list(tags);
  const metadata = values.get('x-service-metadata');
  if (metadata !== undefined) {
    let parsed: { value: unknown } | null = null;
    if (!nestsDeeperThan(metadata, MAX_METADATA_DEPTH)) {
      try {
        parsed = { value: JSON.parse(metadata) as unknown };
      } catch {
        // not JSON: refused below
      }
    }
    if (parsed) body.metadata = parsed.value;
    else details.push({ field: 'metadata', code: 'metadata:invalid_format' });
  }
  const category = values.get('x-service-category');
  if (category !== undefined) body.category = category.trim();
  const scheduledAt = values.get('x-service-scheduled-at');
  if (scheduledAt !== undefined) body.scheduled_at = scheduledAt.trim();
  const paused = values.get('x-service-paused');
  if (paused !== undefined) {
    const v = paused.trim().toLowerCase();
    if (v === 'true' || v === 'false') body.paused = v === 'true';
    else details.push({ field: 'paused', code: 'paused:invalid_type' });
  }
  const provider = values.get('x-service-provider');
  const strategy = values.get('x-service-strategy');
  if (provider !== undefined || strategy !== undefined) {
    const routing: Record<string, unknown> = {};
    if (provider !== undefined) {
      const slugs = list(provider);
      routing.provider = slugs.length === 1 ? slugs[0] : slugs;
    }
    if (strategy !== undefined) routing.strategy = strategy.trim();
    body.routing = routing;
  }
  for (const name of unknown) details.push({ field: `headers.${name}`, code: 'headers:reserved' });
  const key = values.get('x-service-idempotency-key');
  return { body, idempotencyKey: key === undefined ? null : key.trim(), details };
}
