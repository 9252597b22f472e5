import {
  ATTACH_OPTION,
  type AttachOptions,
  attachProvider,
  checkProvider,
  detachProvider,
  listProviders,
  updateProvider,
} from '../operator/providers.js';
import { ACCOUNT_FIELDS } from '../providers/accountFields.js';
import { DECLARED_SLUGS } from '../providers/registry.js';
import { type CommandGroup, type OptionSpec, str } from './command.js';

/** `--api-key` → `api-key`: the name parseArgs gives a flag's value. */
const optionName = (flag: string) => flag.slice(2);

/** Each slug of this build and the flags it takes (from its provider's declaration): `provider attach --help`. */
function attachHelp(): string {
  const lines = ['SLUG is one of these, each with the flags it takes:'];
  for (const declared of DECLARED_SLUGS) {
    lines.push('', `  ${declared.slug}  (${declared.title})`);
    for (const [name, schema] of Object.entries(declared.account.properties)) {
      const field = ACCOUNT_FIELDS.find((f) => f.name === name);
      if (!field || !schema) continue;
      const required = declared.account.required.includes(field.name) ? ' [required]' : '';
      lines.push(
        `    ${`${field.flag} ${field.placeholder}`.padEnd(32)} ${schema.title}${schema.description ? ` (${schema.description})` : ''}${required}`,
      );
    }
  }
  return lines.join('\n');
}

export const providerCommands: CommandGroup = {
  attach: {
    usage: `provider attach --project ID --slug SLUG [${[...ACCOUNT_FIELDS.map((f) => `${f.flag} ${f.placeholder}`), '--label L --free-quota N --priority N'].join(' ')}]`,
    help: attachHelp,
    options: {
      project: { type: 'string' },
      slug: { type: 'string' },
      ...Object.fromEntries(
        ACCOUNT_FIELDS.map((f): [string, OptionSpec[string]] => [
          optionName(f.flag),
          { type: 'string' },
        ]),
      ),
      label: { type: 'string' },
      'free-quota': { type: 'string' },
      priority: { type: 'string' },
    },
    required: ['project', 'slug'],
    run: (ctx, v) => {
      const opts: AttachOptions = {
        slug: str(v.slug)!,
        freeQuota: str(v['free-quota']),
        priority: str(v.priority),
        label: str(v.label),
      };
      for (const field of ACCOUNT_FIELDS)
        opts[ATTACH_OPTION[field.name]] = str(v[optionName(field.flag)]);
      return attachProvider(ctx, str(v.project)!, opts);
    },
  },
  list: {
    usage: 'provider list --project ID',
    options: { project: { type: 'string' } },
    required: ['project'],
    run: (ctx, v) => listProviders(ctx, str(v.project)!),
  },
  detach: {
    usage: 'provider detach ID',
    positionals: ['ID'],
    run: (ctx, _v, [id]) => detachProvider(ctx, id),
  },
  set: {
    usage:
      'provider set ID [--priority N] [--free-quota N|none] [--label L] [--user U] [--pass P] [--api-key K] [--webhook-secret S] [--webhook-public-key K]',
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
  check: {
    usage: 'provider check ID',
    positionals: ['ID'],
    run: (ctx, _v, [id]) => checkProvider(ctx, id),
  },
};
