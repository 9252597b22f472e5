import { parseArgs } from 'node:util';
import { clockFromEnvironment } from '../clock.js';
import { openThreadStore, storeLocationOf } from '../commit/nodeStore.js';
import { ConfigError } from '../config/configError.js';
import { loadConfig, type PosternConfig, resolveConfigPath } from '../config/load.js';
import { OperatorError } from '../operator/errors.js';
import { Spool } from '../spool/spool.js';
import type { StateCommand } from './backup.js';
import {
  type Command,
  type CommandGroup,
  commandLogger,
  type OptionSpec,
  RawOutput,
  TextOutput,
  type Values,
} from './command.js';
import { output } from './output.js';

// Each group is loaded when it is asked for: one command need not load the server or every other
// command (a `postern key list` used 1.1 s of CPU loading them all, the server's modules most).
const groups: Record<string, () => Promise<CommandGroup>> = {
  project: async () => (await import('./project.js')).projectCommands,
  key: async () => (await import('./key.js')).keyCommands,
  provider: async () => (await import('./provider.js')).providerCommands,
  suppression: async () => (await import('./suppression.js')).suppressionCommands,
  message: async () => (await import('./message.js')).messageCommands,
  dkim: async () => (await import('./dkim.js')).dkimCommands,
  domain: async () => (await import('./domain.js')).domainCommands,
  strategy: async () => (await import('./strategy.js')).strategyCommands,
  webhook: async () => (await import('./webhook.js')).webhookCommands,
  operator: async () => (await import('./operator.js')).operatorCommands,
  // Two words: `postern operator token create …`.
  'operator token': async () => (await import('./operator.js')).operatorTokenCommands,
  audit: async () => (await import('./operator.js')).auditCommands,
  overview: async () => (await import('./overview.js')).overviewCommands,
  queue: async () => (await import('./queue.js')).queueCommands,
  node: async () => (await import('./node.js')).nodeCommands,
};

const stateCommands = async (): Promise<Record<string, StateCommand>> =>
  (await import('./backup.js')).stateCommands;
const STATE_COMMANDS = ['backup', 'restore'];

const GLOBAL: OptionSpec = {
  config: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
};

/** Exit codes: 0 done, 1 refused (not found, conflict, invalid value), 2 usage, 78 bad config. */
export const EXIT = { ok: 0, refused: 1, usage: 2, config: 78 } as const;

class UsageError extends Error {}

async function usageText(): Promise<string> {
  const lines = [
    'usage: postern [--config FILE] [--json] COMMAND',
    '',
    '  start [--config FILE]',
    ...Object.values(await stateCommands()).map((c) => `  ${c.usage}`),
  ];
  for (const load of Object.values(groups))
    for (const cmd of Object.values(await load())) lines.push(`  ${cmd.usage}`);
  return lines.join('\n');
}

function parseCommand(cmd: Command, args: string[]): { values: Values; positionals: string[] } {
  const parsed = (() => {
    try {
      return parseArgs({
        args,
        options: { ...GLOBAL, ...cmd.options },
        allowPositionals: true,
        strict: true,
      });
    } catch (err) {
      throw new UsageError(`${(err as Error).message}\nusage: postern ${cmd.usage}`);
    }
  })();
  const expected =
    cmd.positionalsUnless !== undefined && parsed.values[cmd.positionalsUnless] !== undefined
      ? []
      : (cmd.positionals ?? []);
  if (parsed.positionals.length !== expected.length) {
    throw new UsageError(
      `expected ${expected.length ? expected.join(' ') : 'no positional arguments'}\nusage: postern ${cmd.usage}`,
    );
  }
  for (const name of cmd.required ?? []) {
    if (parsed.values[name] === undefined)
      throw new UsageError(`--${name} is required\nusage: postern ${cmd.usage}`);
  }
  return { values: parsed.values as Values, positionals: parsed.positionals };
}

export async function runCli(argv: string[]): Promise<number> {
  const json = argv.includes('--json');
  const out = output(json);
  let [groupName, verb, ...rest] = argv;
  if (verb !== undefined && Object.hasOwn(groups, `${groupName} ${verb}`))
    [groupName, verb, ...rest] = [`${groupName} ${verb}`, ...rest];
  try {
    if (!groupName || groupName === '--help' || groupName === '-h' || groupName === 'help') {
      process.stdout.write(`${await usageText()}\n`);
      return groupName ? EXIT.ok : EXIT.usage;
    }
    if (groupName === 'start') {
      const { values } = parseCommand(
        { usage: 'start [--config FILE] [--json]', run: () => undefined },
        argv.slice(1),
      );
      const { runStart } = await import('./start.js');
      return await runStart(
        resolveConfigPath(values.config as string | undefined),
        out,
        values.config as string | undefined,
      );
    }
    const stateCommand = STATE_COMMANDS.includes(groupName)
      ? (await stateCommands())[groupName]
      : undefined;
    if (stateCommand) {
      // No index is opened here: backup reads the live one itself, restore creates one.
      const { values } = parseCommand({ ...stateCommand, run: () => undefined }, argv.slice(1));
      const config = loadConfig(resolveConfigPath(values.config as string | undefined));
      out.print(await stateCommand.run(config, values, commandLogger()));
      return EXIT.ok;
    }
    const group = Object.hasOwn(groups, groupName) ? await groups[groupName]() : undefined;
    const cmd = group && verb && Object.hasOwn(group, verb) ? group[verb] : undefined;
    if (!cmd)
      throw new UsageError(
        `unknown command "${[groupName, verb].filter(Boolean).join(' ')}"\n${await usageText()}`,
      );
    if (rest.includes('--help') || rest.includes('-h')) {
      process.stdout.write(`usage: postern ${cmd.usage}\n${cmd.help ? `\n${cmd.help()}\n` : ''}`);
      return EXIT.ok;
    }
    const { values, positionals } = parseCommand(cmd, rest);
    const config: PosternConfig = loadConfig(
      resolveConfigPath(values.config as string | undefined),
    );
    const logger = commandLogger();
    // The configured backend, migrated as a node would migrate it (a command may come before the
    // first start). On PostgreSQL that is the database every node shares, so what a command
    // changes (a key revoked, a project paused) acts on every node's next request.
    const opened = await openThreadStore(storeLocationOf(config), logger, 'cli', { migrate: true });
    try {
      const result = await cmd.run(
        {
          store: opened.store,
          clock: clockFromEnvironment(),
          config,
          spoolRoot: new Spool(config.state_dir, logger).root,
        },
        values,
        positionals,
      );
      if (result instanceof RawOutput) {
        await new Promise<void>((resolve, reject) =>
          result.stream.on('error', reject).on('end', resolve).pipe(process.stdout, { end: false }),
        );
      } else if (result instanceof TextOutput) {
        for await (const chunk of result.chunks)
          if (!process.stdout.write(chunk))
            await new Promise((resolve) => process.stdout.once('drain', resolve));
      } else {
        out.print(result);
      }
      return EXIT.ok;
    } finally {
      await opened.close();
    }
  } catch (err) {
    if (err instanceof UsageError) {
      out.fail('usage', err.message);
      return EXIT.usage;
    }
    if (err instanceof ConfigError) {
      out.fail('config_invalid', err.message, { key: err.key });
      return EXIT.config;
    }
    if (err instanceof OperatorError) {
      out.fail(err.code, err.message);
      return EXIT.refused;
    }
    out.fail('internal', (err as Error).message);
    return EXIT.refused;
  }
}
