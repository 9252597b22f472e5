import { PassThrough, type Readable } from 'node:stream';
import { type AttachmentStream, MailParser, type MessageText } from 'mailparser';
import type { OperatorContext } from './context.js';
import { notFound } from './errors.js';
import { openMessageMime } from './messages.js';

/** Longer bodies are cut (and say so). */
export const BODY_PREVIEW_CHARS = 2 * 1024 * 1024;

export interface AttachmentInfo {
  /** Among the attachments (inline images included), from 0: the download address. */
  index: number;
  filename: string | null;
  content_type: string;
  disposition: 'attachment' | 'inline';
  content_id: string | null;
  size: number;
}

export interface MessageContent {
  id: string;
  /** In order, unfolded (Bcc is never stored). */
  headers: { name: string; value: string }[];
  text: string | null;
  html: string | null;
  text_truncated: boolean;
  html_truncated: boolean;
  attachments: AttachmentInfo[];
}

const newParser = () =>
  new MailParser({
    skipHtmlToText: true,
    skipTextToHtml: true,
    skipTextLinks: true,
    skipImageLinks: true,
  });

function info(a: AttachmentStream, index: number, size: number): AttachmentInfo {
  return {
    index,
    filename: a.filename ?? null,
    content_type: a.contentType,
    disposition:
      a.contentDisposition === 'inline' || (a.related && a.contentId) ? 'inline' : 'attachment',
    content_id: a.contentId ? a.contentId.replace(/^<|>$/g, '') : null,
    size,
  };
}

const cut = (s: string | undefined | false) =>
  typeof s === 'string'
    ? { value: s.slice(0, BODY_PREVIEW_CHARS), truncated: s.length > BODY_PREVIEW_CHARS }
    : { value: null, truncated: false };

/** Streamed through the parser; attachment contents are counted and dropped, never held. */
export async function messageContent(ctx: OperatorContext, id: string): Promise<MessageContent> {
  const source = await openMessageMime(ctx, id);
  return new Promise((resolve, reject) => {
    const parser = newParser();
    const attachments: AttachmentInfo[] = [];
    let headers: { name: string; value: string }[] = [];
    let text: MessageText | null = null;
    parser.on('headerLines', (lines: { key: string; line: string }[]) => {
      headers = lines.map((l) => {
        const colon = l.line.indexOf(':');
        return {
          name: l.line.slice(0, colon).trim(),
          value: l.line
            .slice(colon + 1)
            .replace(/\r?\n[ \t]+/g, ' ')
            .trim(),
        };
      });
    });
    parser.on('data', (data: AttachmentStream | MessageText) => {
      if (data.type === 'text') {
        text = data;
        return;
      }
      let size = 0;
      const index = attachments.length;
      attachments.push(info(data, index, 0));
      data.content.on('data', (chunk: Buffer) => (size += chunk.length));
      data.content.on('end', () => {
        attachments[index].size = size;
        data.release?.();
      });
    });
    parser.on('error', reject);
    source.on('error', reject);
    parser.on('end', () => {
      const t = cut((text as MessageText | null)?.text);
      const h = cut((text as MessageText | null)?.html);
      resolve({
        id,
        headers,
        text: t.value,
        html: h.value,
        text_truncated: t.truncated,
        html_truncated: h.truncated,
        attachments,
      });
    });
    source.pipe(parser);
  });
}

export async function openAttachment(
  ctx: OperatorContext,
  id: string,
  index: number,
): Promise<{ attachment: AttachmentInfo; stream: Readable }> {
  const source = await openMessageMime(ctx, id);
  return new Promise((resolve, reject) => {
    const parser = newParser();
    let seen = 0;
    let found = false;
    const stop = () => {
      source.unpipe(parser);
      source.destroy();
    };
    parser.on('data', (data: AttachmentStream | MessageText) => {
      if (data.type === 'text') return;
      const i = seen++;
      if (i !== index) {
        data.content.on('end', () => data.release?.());
        data.content.resume();
        return;
      }
      found = true;
      const out = new PassThrough();
      data.content.pipe(out);
      data.content.on('end', () => {
        data.release?.();
        stop();
      });
      out.on('close', () => {
        // The client went away before the end: stop reading the file.
        if (!data.content.readableEnded) stop();
      });
      resolve({ attachment: info(data, i, 0), stream: out });
    });
    parser.on('error', (err: Error) => (found ? undefined : reject(err)));
    source.on('error', (err) => (found ? undefined : reject(err)));
    parser.on('end', () => {
      if (!found) reject(notFound('attachment', `${index} of message ${id}`));
    });
    source.pipe(parser);
  });
}
