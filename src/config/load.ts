import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv, type ErrorObject } from 'ajv';
import { trustedProxyProblem } from '../platform/trustedProxies.js';
import { ConfigError } from './configError.js';
import schema from './schema.json' with { type: 'json' };
import type { PosternConfig as ConfigFile } from './types.gen.js';

/** `node.id` resolved (null in the file: the host name). */
export type PosternConfig = ConfigFile & { node: { id: string } };
type AnyListenerConfig = PosternConfig['listeners'][number];
export type ListenerConfig = AnyListenerConfig & {
  protocol: 'http' | 'smtp';
  environment: 'production' | 'sandbox';
};
export type ConsoleListenerConfig = AnyListenerConfig & { protocol: 'console' };
export const isConsoleListener = (l: AnyListenerConfig): l is ConsoleListenerConfig =>
  l.protocol === 'console';
export const isDoorListener = (l: AnyListenerConfig): l is ListenerConfig =>
  l.protocol !== 'console' && l.environment !== undefined;
export type PlanConfig = NonNullable<PosternConfig['plans'][string]>;

const ajv = new Ajv({ allErrors: false, useDefaults: true, strict: true });
const validate = ajv.compile<ConfigFile>(schema);

export const defaultConfigPath = fileURLToPath(
  new URL('../../../config/default.json', import.meta.url),
);

export function resolveConfigPath(
  flag: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): string {
  return path.resolve(flag ?? env.POSTERN_CONFIG ?? defaultConfigPath);
}

function dotted(err: ErrorObject): string {
  const base = err.instancePath.slice(1).replace(/\//g, '.');
  const extra =
    err.keyword === 'additionalProperties'
      ? String(err.params.additionalProperty)
      : err.keyword === 'required'
        ? String(err.params.missingProperty)
        : '';
  return [base, extra].filter(Boolean).join('.') || '(root)';
}

export function loadConfig(file: string, env: NodeJS.ProcessEnv = process.env): PosternConfig {
  if (!existsSync(file)) throw new ConfigError(`config file ${file} does not exist`, null);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError(`config file ${file} is not valid JSON: ${(err as Error).message}`, null);
  }
  return buildConfig(raw, env, file);
}

export function buildConfig(
  raw: unknown,
  env: NodeJS.ProcessEnv = process.env,
  source = 'config',
): PosternConfig {
  const candidate = structuredClone(raw);
  if (!validate(candidate)) {
    const err = validate.errors![0];
    const key = dotted(err);
    throw new ConfigError(`${source}: ${key} ${err.message ?? 'is invalid'}`, key);
  }
  const config = candidate;
  applyEnvironment(config, env);
  const names = new Set<string>();
  config.listeners.forEach((l, i) => {
    if (names.has(l.name))
      throw new ConfigError(
        `${source}: listeners.${i}.name "${l.name}" is used twice`,
        `listeners.${i}.name`,
      );
    names.add(l.name);
    checkProxyProtocol(l, `listeners.${i}`, source);
  });
  checkTrustedProxies(config.http.trusted_proxies, 'http.trusted_proxies', source);
  checkTls(config, source);
  if (!config.plans[config.default_plan]) {
    throw new ConfigError(
      `${source}: default_plan "${config.default_plan}" is not one of plans (${Object.keys(config.plans).join(', ')})`,
      'default_plan',
    );
  }
  checkStore(config, source);
  checkConsoleStreams(config, source);
  config.state_dir = path.resolve(config.state_dir);
  // Resolved once, so every reader (heartbeat, metrics, logs) names this node alike.
  config.node.id ??= os.hostname();
  return config as PosternConfig;
}

function checkStore(config: ConfigFile, source: string): void {
  const { backend, postgres } = config.store;
  if (backend !== 'postgres') return;
  if (!postgres.url)
    throw new ConfigError(
      `${source}: store.postgres.url (or POSTERN_DATABASE_URL) is required with store.backend "postgres"`,
      'store.postgres.url',
    );
  let url: URL;
  try {
    url = new URL(postgres.url);
  } catch {
    // The URL itself is not repeated: it may hold a password.
    throw new ConfigError(
      `${source}: store.postgres.url is not a URL (postgres://user:password@host:port/database)`,
      'store.postgres.url',
    );
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new ConfigError(
      `${source}: store.postgres.url must start with postgres:// or postgresql:// (got ${url.protocol}//)`,
      'store.postgres.url',
    );
  }
}

/** At the cap, no room would be left for a sign-out. */
function checkConsoleStreams(config: ConfigFile, source: string): void {
  const { max_streams: streams, max_connections: connections } = config.console;
  if (streams >= connections) {
    throw new ConfigError(
      `${source}: console.max_streams (${streams}) must be below console.max_connections (${connections}): the console's other requests need connections too`,
      'console.max_streams',
    );
  }
}

function checkTrustedProxies(entries: readonly string[], key: string, source: string): void {
  entries.forEach((entry, i) => {
    const problem = trustedProxyProblem(entry);
    if (problem)
      throw new ConfigError(`${source}: ${key}.${i} "${entry}" ${problem}`, `${key}.${i}`);
  });
}

/** Without the load balancer's addresses anyone could claim any address. */
function checkProxyProtocol(listener: AnyListenerConfig, key: string, source: string): void {
  const { protocol, proxy_protocol: enabled, trusted_proxies: proxies } = listener;
  if (protocol !== 'smtp' && (enabled || proxies.length > 0)) {
    throw new ConfigError(
      `${source}: ${key}.proxy_protocol and trusted_proxies are for SMTP listeners (HTTP and console listeners: http.trusted_proxies)`,
      `${key}.proxy_protocol`,
    );
  }
  if (enabled && proxies.length === 0) {
    throw new ConfigError(
      `${source}: ${key}.trusted_proxies must list the load balancer's addresses when proxy_protocol is true`,
      `${key}.trusted_proxies`,
    );
  }
  if (!enabled && proxies.length > 0) {
    throw new ConfigError(
      `${source}: ${key}.trusted_proxies is used only with proxy_protocol: true`,
      `${key}.trusted_proxies`,
    );
  }
  checkTrustedProxies(proxies, `${key}.trusted_proxies`, source);
}

/** cert/key or tls.acme, never both; tls.acme answered where its challenge is; redirect_plain pointing to HTTPS. */
function checkTls(config: ConfigFile, source: string): void {
  const acme = config.tls.acme;
  const serving = (l: AnyListenerConfig) => l.acme || Boolean(l.cert && l.key);
  config.listeners.forEach((l, i) => {
    const key = `listeners.${i}`;
    if (l.protocol === 'smtp' && (l.cert || l.key)) {
      throw new ConfigError(
        `${source}: ${key}.cert and key are for HTTP and console listeners; an SMTP listener serves smtp.tls (or tls.acme's certificate with acme: true)`,
        `${key}.cert`,
      );
    }
    if (Boolean(l.cert) !== Boolean(l.key))
      throw new ConfigError(
        `${source}: ${key}.cert and ${key}.key must be set together`,
        l.cert ? `${key}.key` : `${key}.cert`,
      );
    if (l.acme && l.cert)
      throw new ConfigError(
        `${source}: ${key} has both cert/key and acme: true; choose one`,
        `${key}.acme`,
      );
    if (l.acme && !acme)
      throw new ConfigError(
        `${source}: ${key}.acme needs tls.acme (the CA, email and domains of the certificate)`,
        `${key}.acme`,
      );
  });
  if (acme) {
    if (!config.listeners.some((l) => l.acme))
      throw new ConfigError(
        `${source}: tls.acme is set but no listener serves its certificate (acme: true)`,
        'tls.acme',
      );
    if (acme.challenge === 'http-01' && !config.http.redirect_plain) {
      throw new ConfigError(
        `${source}: tls.acme.challenge http-01 is answered on port 80 by http.redirect_plain, which is not set (or use tls-alpn-01)`,
        'tls.acme.challenge',
      );
    }
    if (
      acme.challenge === 'tls-alpn-01' &&
      !config.listeners.some((l) => l.acme && l.protocol !== 'smtp')
    ) {
      throw new ConfigError(
        `${source}: tls.acme.challenge tls-alpn-01 is answered on port 443 by an HTTP or console listener with acme: true, and there is none`,
        'tls.acme.challenge',
      );
    }
  }
  const redirect = config.http.redirect_plain;
  if (redirect) {
    const https = config.listeners.filter((l) => l.protocol !== 'smtp' && serving(l));
    if (redirect.to === null ? https.length === 0 : !https.some((l) => l.name === redirect.to)) {
      const what =
        redirect.to === null
          ? 'no HTTP or console listener serves HTTPS'
          : `"${redirect.to}" is not an HTTP or console listener that serves HTTPS`;
      throw new ConfigError(
        `${source}: http.redirect_plain redirects to HTTPS, but ${what} (cert/key or acme: true)`,
        redirect.to === null ? 'http.redirect_plain' : 'http.redirect_plain.to',
      );
    }
  }
}

export function listenerEnvName(name: string): string {
  return `POSTERN_LISTEN_${name.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

function applyEnvironment(config: ConfigFile, env: NodeJS.ProcessEnv): void {
  if (env.POSTERN_STATE_DIR) config.state_dir = env.POSTERN_STATE_DIR;
  if (env.POSTERN_NODE_ID) config.node.id = env.POSTERN_NODE_ID;
  if (env.POSTERN_STORE_BACKEND) {
    const backend = env.POSTERN_STORE_BACKEND;
    if (backend !== 'sqlite' && backend !== 'postgres')
      throw new ConfigError(
        `POSTERN_STORE_BACKEND must be sqlite or postgres (got "${backend}")`,
        'POSTERN_STORE_BACKEND',
      );
    config.store.backend = backend;
  }
  if (env.POSTERN_DATABASE_URL) config.store.postgres.url = env.POSTERN_DATABASE_URL;
  for (const listener of config.listeners) {
    const variable = listenerEnvName(listener.name);
    const value = env[variable];
    if (value === undefined || value === '') continue;
    const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(value);
    const port = m ? Number(m[3]) : NaN;
    if (!m || port > 65535)
      throw new ConfigError(`${variable} must be host:port (got "${value}")`, variable);
    listener.host = m[1] ?? (m[2] || listener.host);
    listener.port = port;
  }
}
