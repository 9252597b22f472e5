import { randomBytes } from 'node:crypto';
import { openAsBlob } from 'node:fs';
import { Readable } from 'node:stream';
import type { ProviderAccount } from '../../contract/providerAccount.js';
import type { AdapterDeps, DeliveryJob, ProviderAdapter, SendResult } from '../adapter.js';
import {
  type ApiResponse,
  baseUrl,
  callProviderApi,
  classifyStatus,
  isResponse,
  replyText,
} from '../httpApi.js';
import { apiCredentials, missingApiKey } from '../jsonMapping.js';

export const MAILGUN_US = 'https://api.mailgun.net';
export const MAILGUN_EU = 'https://api.eu.mailgun.net';
export const MAILGUN_MAX_TAGS = 3;
/** Carries our message id back in every event (`user-variables`). */
export const POSTERN_ID_VARIABLE = 'postern_message_id';

/** 400s worded as the account (domain) not being able to send at all: the next account may take it. */
const ACCOUNT_REFUSALS =
  /not allowed to send|sandbox|authorized recipients|domain .*(not found|disabled|unverified|not verified)|account .*(disabled|suspended)|is disabled/i;

function messageOf(res: ApiResponse): string {
  try {
    const body = JSON.parse(res.text) as { message?: unknown };
    if (typeof body.message === 'string') return body.message;
  } catch {}
  return res.text.trim();
}

/** Mailgun's documented error statuses (docs/delivery.md#provider-c-api-mailgun). */
export function classifyMailgun(
  res: ApiResponse,
  reply: string,
  now: number,
): Exclude<SendResult, { kind: 'sent' }> {
  if (res.status === 402 || res.status === 404) return { kind: 'account', reply };
  if (res.status === 400 && ACCOUNT_REFUSALS.test(messageOf(res)))
    return { kind: 'account', reply };
  return classifyStatus(res, reply, now);
}

/** provider-c-api: the stored MIME as is, so our signature survives; the envelope recipients (Bcc included) are the `to` fields. */
export class MailgunApiAdapter implements ProviderAdapter {
  constructor(private readonly deps: AdapterDeps) {}

  async send(job: DeliveryJob, account: ProviderAccount): Promise<SendResult> {
    const { apiKey, endpoint, region } = apiCredentials(account);
    const { domain } = account.settings;
    if (!apiKey) return missingApiKey(account.slug);
    if (!domain)
      return { kind: 'account', reply: `${account.slug}: the account has no sending domain` };
    const url = `${baseUrl(endpoint, region?.toLowerCase() === 'eu' ? MAILGUN_EU : MAILGUN_US)}/v3/${encodeURIComponent(domain)}/messages.mime`;

    const fields: [string, string][] = job.envelope.to.map((to) => ['to', to]);
    const tags = [...new Set([...(job.category ? [job.category] : []), ...job.tags])].slice(
      0,
      MAILGUN_MAX_TAGS,
    );
    for (const tag of tags) fields.push(['o:tag', tag]);
    for (const [key, value] of Object.entries(job.metadata))
      if (key !== POSTERN_ID_VARIABLE) fields.push([`v:${key}`, value]);
    fields.push([`v:${POSTERN_ID_VARIABLE}`, job.messageId]);
    let body: FormData | Readable;
    const headers: Record<string, string> = {
      authorization: `Basic ${Buffer.from(`api:${apiKey}`).toString('base64')}`,
      accept: 'application/json',
    };
    if (job.openMime) {
      // PostgreSQL's pieces: a form written as they are read, never whole in memory.
      const boundary = `postern-${randomBytes(12).toString('hex')}`;
      body = streamedForm(boundary, fields, job.prependHeaders, job.openMime);
      headers['content-type'] = `multipart/form-data; boundary=${boundary}`;
    } else {
      const form = new FormData();
      // A held buffer comes from readFileSync or the index: its memory is a plain ArrayBuffer.
      const mime = new Blob(
        [
          job.prependHeaders,
          job.mime ? (job.mime as Uint8Array<ArrayBuffer>) : await openAsBlob(job.mimePath),
        ],
        { type: 'message/rfc822' },
      );
      for (const [name, value] of fields.filter(([n]) => n === 'to')) form.append(name, value);
      form.append('message', mime, 'message.mime');
      for (const [name, value] of fields.filter(([n]) => n !== 'to')) form.append(name, value);
      body = form;
    }

    const res = await callProviderApi({
      method: 'POST',
      url,
      headers,
      body,
      timeoutMs: this.deps.timeoutMs,
    });
    if (!isResponse(res)) return res;
    const reply = replyText(res);
    if (res.status !== 200) return classifyMailgun(res, reply, this.deps.clock.now());
    let id: string | null = null;
    try {
      const body = JSON.parse(res.text) as { id?: unknown };
      // Events quote `message.headers.message-id` without angle brackets: stored the same way.
      if (typeof body.id === 'string') id = body.id.trim().replace(/^<|>$/g, '');
    } catch {
      // Accepted without a readable id: sent, feedback matches by our user variable.
    }
    return { kind: 'sent', providerMessageId: id, reply, bounced: [], deferred: [] };
  }

  async close(): Promise<void> {}
}

/** multipart/form-data as FormData writes it, the message streamed from `open`. */
function streamedForm(
  boundary: string,
  fields: [string, string][],
  prefix: string,
  open: () => Readable,
): Readable {
  // As the HTML form encoding (and undici's FormData) escapes names.
  const formName = (name: string) =>
    name.replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
  const part = (name: string, extra = '') =>
    `--${boundary}\r\nContent-Disposition: form-data; name="${formName(name)}"${extra}\r\n`;
  const field = ([name, value]: [string, string]) => Buffer.from(`${part(name)}\r\n${value}\r\n`);
  return Readable.from(
    (async function* () {
      for (const f of fields) if (f[0] === 'to') yield field(f);
      yield Buffer.from(
        `${part('message', '; filename="message.mime"')}Content-Type: message/rfc822\r\n\r\n${prefix}`,
      );
      yield* open();
      yield Buffer.from('\r\n');
      for (const f of fields) if (f[0] !== 'to') yield field(f);
      yield Buffer.from(`--${boundary}--\r\n`);
    })(),
    { objectMode: false },
  );
}
