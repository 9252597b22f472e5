/** What `postern start` tells its user: on a first run, how to create the first owner; and which listeners serve plain text to others. */
import { BlockList, isIP } from 'node:net';
import path from 'node:path';
import type { BoundListener } from '../main.js';

export interface FirstRun {
  console_url: string | null;
  /** It prints a one-time password. */
  create_owner: string;
}

export interface PlainTextListener {
  name: string;
  url: string;
}

export interface StartNotices {
  first_run: FirstRun | null;
  plain_text_listeners: PlainTextListener[];
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');
LOOPBACK.addSubnet('::ffff:127.0.0.0', 104, 'ipv6');

/** 127.0.0.0/8, ::1 and `localhost`: only this host reaches it. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  const family = isIP(h);
  return family !== 0 && LOOPBACK.check(h, family === 4 ? 'ipv4' : 'ipv6');
}

const shellWord = (word: string): string =>
  /^[A-Za-z0-9_./:=@%+,-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;

export function cliInvocation(
  script: string,
  cwd: string,
  configFlag: string | undefined,
  pathVariable = process.env.PATH ?? '',
): string {
  const relative = path.relative(cwd, script);
  let command: string;
  if (
    pathVariable
      .split(path.delimiter)
      .filter(Boolean)
      .some((dir) => path.resolve(dir) === path.dirname(script))
  )
    command = path.basename(script);
  else if (relative && !relative.startsWith('..') && !path.isAbsolute(relative))
    command = `.${path.sep}${relative}`;
  else command = script;
  return [
    shellWord(command),
    ...(configFlag !== undefined ? ['--config', shellWord(configFlag)] : []),
  ].join(' ');
}

export function startNotices(
  listeners: readonly BoundListener[],
  hasOperator: boolean,
  invocation: string,
): StartNotices {
  const consoleListener = listeners.find((l) => l.protocol === 'console');
  return {
    first_run: hasOperator
      ? null
      : {
          console_url: consoleListener ? `${consoleListener.url}/` : null,
          create_owner: `${invocation} operator create --email you@example.com --role owner`,
        },
    // SMTP listeners are not listed: AUTH is offered only over TLS, and mail is relayed only after AUTH.
    plain_text_listeners: listeners
      .filter((l) => l.protocol !== 'smtp' && l.url.startsWith('http://') && !isLoopback(l.host))
      .map((l) => ({ name: l.name, url: l.url })),
  };
}

export function noticeText(notices: StartNotices): string {
  const lines: string[] = [];
  const first = notices.first_run;
  if (first) {
    lines.push(
      '',
      'First run: no operator exists yet. Create the first owner (in another terminal, in this directory):',
      '',
      `  ${first.create_owner}`,
      '',
      first.console_url
        ? `It prints a one-time password: sign in with it at ${first.console_url} and choose your own.`
        : 'It prints a one-time password. This config serves no console listener: add one (protocol "console") to sign in.',
    );
  }
  if (notices.plain_text_listeners.length > 0) {
    lines.push(
      '',
      'Plain text on an address other hosts can reach (API keys and passwords would cross the network in clear):',
    );
    for (const l of notices.plain_text_listeners) lines.push(`  ${l.name}  ${l.url}`);
    lines.push(
      'Give each cert/key or "acme": true (docs/tls.md), or bind it to 127.0.0.1 behind a TLS proxy.',
    );
  }
  return lines.join('\n');
}
