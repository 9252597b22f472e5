import { attachProvider, checkProvider, detachProvider, listProviders, updateProvider } from '../operator/providers.js';
import { str, type CommandGroup } from './command.js';

export const providerCommands: CommandGroup = {
  attach: {
    usage:
      'provider attach --project ID --slug SLUG [--host H --port N --user U --pass P --tls starttls|implicit|none --endpoint URL --api-key K --region R --domain D --webhook-secret S --webhook-public-key K --label L --free-quota N --priority N]',
    options: {
      project: { type: 'string' },
      slug: { type: 'string' },
      host: { type: 'string' },
      port: { type: 'string' },
      user: { type: 'string' },
      pass: { type: 'string' },
      tls: { type: 'string' },
      endpoint: { type: 'string' },
      'api-key': { type: 'string' },
      region: { type: 'string' },
      domain: { type: 'string' },
      'webhook-secret': { type: 'string' },
      'webhook-public-key': { type: 'string' },
      label: { type: 'string' },
      'free-quota': { type: 'string' },
      priority: { type: 'string' },
    },
    required: ['project', 'slug'],
    run: (ctx, v) =>
      attachProvider(ctx, str(v.project)!, {
        slug: str(v.slug)!,
        host: str(v.host),
        port: str(v.port),
        user: str(v.user),
        pass: str(v.pass),
        tls: str(v.tls),
        endpoint: str(v.endpoint),
        apiKey: str(v['api-key']),
        region: str(v.region),
        domain: str(v.domain),
        webhookSecret: str(v['webhook-secret']),
        webhookPublicKey: str(v['webhook-public-key']),
        label: str(v.label),
        freeQuota: str(v['free-quota']),
        priority: str(v.priority),
      }),
  },
  list: { usage: 'provider list --project ID', options: { project: { type: 'string' } }, required: ['project'], run: (ctx, v) => listProviders(ctx, str(v.project)!) },
  detach: { usage: 'provider detach ID', positionals: ['ID'], run: (ctx, _v, [id]) => detachProvider(ctx, id) },
  set: {
    usage: 'provider set ID [--priority N] [--free-quota N|none] [--label L] [--user U] [--pass P] [--api-key K] [--webhook-secret S] [--webhook-public-key K]',
    positionals: ['ID'],
    options: {
      priority: { type: 'string' },
      'free-quota': { type: 'string' },
      label: { type: 'string' },
      user: { type: 'string' },
      pass: { type: 'string' },
      'api-key': { type: 'string' },
      'webhook-secret': { type: 'string' },
      'webhook-public-key': { type: 'string' },
    },
    run: (ctx, v, [id]) =>
      updateProvider(ctx, id, {
        priority: str(v.priority),
        freeQuota: str(v['free-quota']) === 'none' ? null : str(v['free-quota']),
        label: str(v.label),
        user: str(v.user),
        pass: str(v.pass),
        apiKey: str(v['api-key']),
        webhookSecret: str(v['webhook-secret']),
        webhookPublicKey: str(v['webhook-public-key']),
      }),
  },
  check: { usage: 'provider check ID', positionals: ['ID'], run: (ctx, _v, [id]) => checkProvider(ctx, id) },
};
