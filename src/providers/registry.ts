import os from 'node:os';
import type { Clock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import type { ProviderAdapter } from './adapter.js';
import { BrevoApiAdapter } from './brevoApi.js';
import { MailgunApiAdapter } from './mailgunApi.js';
import { PostmarkApiAdapter } from './postmarkApi.js';
import { ResendApiAdapter } from './resendApi.js';
import { SendgridApiAdapter } from './sendgridApi.js';
import { SesApiAdapter } from './sesApi.js';
import { SmtpRelayAdapter } from './smtpRelay.js';

export interface AdapterDeps {
  clock: Clock;
  logger: Logger;
  config: PosternConfig;
}

export interface AdapterRegistry {
  adapterFor(slug: string): ProviderAdapter | undefined;
  close(): Promise<void>;
}

/** The HTTP API adapters, one per `provider-*-api` slug, each speaking its provider's public API. */
const apiAdapters: Record<string, (deps: AdapterDeps) => ProviderAdapter> = {
  'provider-a-api': (deps) => new SesApiAdapter(deps),
  'provider-b-api': (deps) => new SendgridApiAdapter(deps),
  'provider-c-api': (deps) => new MailgunApiAdapter({ clock: deps.clock, timeoutMs: deps.config.delivery.api_timeout_ms }),
  'provider-d-api': (deps) => new ResendApiAdapter(deps),
  'provider-e-api': (deps) => new PostmarkApiAdapter({ clock: deps.clock, timeoutMs: deps.config.delivery.api_timeout_ms }),
  'provider-f-api': (deps) => new BrevoApiAdapter({ clock: deps.clock, timeoutMs: deps.config.delivery.api_timeout_ms }),
};

/** Every adapter of this release: the SMTP relay for `smtp` and `provider-*-smtp`, and the API ones. */
export function createAdapterRegistry(deps: AdapterDeps): AdapterRegistry {
  const { config } = deps;
  const relay = new SmtpRelayAdapter({ timeoutMs: config.delivery.smtp_timeout_ms, poolSize: config.delivery.smtp_pool_size, name: config.smtp.hostname ?? os.hostname() });
  const apis = new Map<string, ProviderAdapter>();
  return {
    adapterFor(slug) {
      if (slug === 'smtp' || slug.endsWith('-smtp')) return relay;
      let adapter = apis.get(slug);
      if (!adapter && apiAdapters[slug]) {
        adapter = apiAdapters[slug](deps);
        apis.set(slug, adapter);
      }
      return adapter;
    },
    async close() {
      await Promise.all([relay.close(), ...[...apis.values()].map((a) => a.close())]);
    },
  };
}
