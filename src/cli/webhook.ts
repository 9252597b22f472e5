import {
  redeliverWebhook,
  testWebhook,
  webhookAttempts,
  webhookDelivery,
} from '../operator/webhookDeliveries.js';
import {
  addWebhook,
  enableWebhook,
  listWebhooks,
  removeWebhook,
  rotateWebhookSecret,
} from '../operator/webhookEndpoints.js';
import { type CommandGroup, int, str } from './command.js';

export const webhookCommands: CommandGroup = {
  add: {
    usage: 'webhook add --project ID --url URL [--events T,…]',
    options: { project: { type: 'string' }, url: { type: 'string' }, events: { type: 'string' } },
    required: ['project', 'url'],
    run: (ctx, v) => addWebhook(ctx, str(v.project)!, str(v.url)!, str(v.events)),
  },
  list: {
    usage: 'webhook list --project ID',
    options: { project: { type: 'string' } },
    required: ['project'],
    run: (ctx, v) => listWebhooks(ctx, str(v.project)!),
  },
  test: {
    usage: 'webhook test ID',
    positionals: ['ID'],
    run: (ctx, _v, [id]) => testWebhook(ctx, id),
  },
  remove: {
    usage: 'webhook remove ID',
    positionals: ['ID'],
    run: (ctx, _v, [id]) => removeWebhook(ctx, id),
  },
  'rotate-secret': {
    usage: 'webhook rotate-secret ID',
    positionals: ['ID'],
    run: (ctx, _v, [id]) => rotateWebhookSecret(ctx, id),
  },
  enable: {
    usage: 'webhook enable ID',
    positionals: ['ID'],
    run: (ctx, _v, [id]) => enableWebhook(ctx, id),
  },
  attempts: {
    usage: 'webhook attempts ID [--limit N] [--cursor C]',
    positionals: ['ID'],
    options: { limit: { type: 'string' }, cursor: { type: 'string' } },
    run: (ctx, v, [id]) =>
      webhookAttempts(ctx, id, { limit: int('limit', v.limit), cursor: str(v.cursor) }),
  },
  delivery: {
    usage: 'webhook delivery ID DELIVERY_ID',
    positionals: ['ID', 'DELIVERY_ID'],
    run: (ctx, _v, [id, delivery]) => webhookDelivery(ctx, id, delivery),
  },
  redeliver: {
    usage: 'webhook redeliver ID DELIVERY_ID',
    positionals: ['ID', 'DELIVERY_ID'],
    run: (ctx, _v, [id, delivery]) => redeliverWebhook(ctx, id, delivery),
  },
};
