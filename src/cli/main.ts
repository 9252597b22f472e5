import { parseArgs } from 'node:util';
import { clockFromEnvironment } from '../clock.js';
import { ConfigError } from '../config/configError.js';
import { loadConfig, resolveConfigPath, type PosternConfig } from '../config/load.js';
import { OperatorError } from '../operator/errors.js';
import { openThreadStore, storeLocationOf } from '../commit/nodeStore.js';
import { Spool } from '../spool/spool.js';
import { commandLogger, TextOutput, type Command, type CommandGroup, type OptionSpec, type Values } from './command.js';
import { dkimCommands } from './dkim.js';
import { domainCommands } from './domain.js';
import { keyCommands } from './key.js';
import { messageCommands, RawOutput } from './message.js';
import { output } from './output.js';
import { projectCommands } from './project.js';
import { providerCommands } from './provider.js';
import { runStart } from './start.js';
import { suppressionCommands } from './suppression.js';
import { strategyCommands } from './strategy.js';
import { webhookCommands } from './webhook.js';
import { auditCommands, operatorCommands, operatorTokenCommands } from './operator.js';
import { overviewCommands } from './overview.js';
import { stateCommands } from './backup.js';
import { queueCommands } from './queue.js';
import { nodeCommands } from './node.js';

const groups: Record<string, CommandGroup> = {
  project: projectCommands,
  key: keyCommands,
  provider: providerCommands,
  suppression: suppressionCommands,
  message: messageCommands,
  dkim: dkimCommands,
  domain: domainCommands,
  strategy: strategyCommands,
  webhook: webhookCommands,
  operator: operatorCommands,
  // Two words: `postern operator token create …`.
  'operator token': operatorTokenCommands,
  audit: auditCommands,
  overview: overviewCommands,
  queue: queueCommands,
  node: nodeCommands,
};

const GLOBAL: OptionSpec = { config: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } };

/** Exit codes: 0 done, 1 refused (not found, conflict, invalid value), 2 usage, 78 bad config. */
export const EXIT = { ok: 0, refused: 1, usage: 2, config: 78 } as const;

class UsageError extends Error {}

function usageText(): string {
  const lines = ['usage: postern [--config FILE] [--json] COMMAND', '', '  start [--config FILE]', ...Object.values(stateCommands).map((c) => `  ${c.usage}`)];
  for (const [, group] of Object.entries(groups)) for (const cmd of Object.values(group)) lines.push(`  ${cmd.usage}`);
  return lines.join('\n');
}

function parseCommand(cmd: Command, args: string[]): { values: Values; positionals: string[] } {
  const parsed = (() => {
    try {
      return parseArgs({ args, options: { ...GLOBAL, ...cmd.options }, allowPositionals: true, strict: true });
    } catch (err) {
      throw new UsageError(`${(err as Error).message}\nusage: postern ${cmd.usage}`);
    }
  })();
  const expected = cmd.positionalsUnless !== undefined && parsed.values[cmd.positionalsUnless] !== undefined ? [] : (cmd.positionals ?? []);
  if (parsed.positionals.length !== expected.length) {
    throw new UsageError(`expected ${expected.length ? expected.join(' ') : 'no positional arguments'}\nusage: postern ${cmd.usage}`);
  }
  for (const name of cmd.required ?? []) {
    if (parsed.values[name] === undefined) throw new UsageError(`--${name} is required\nusage: postern ${cmd.usage}`);
  }
  return { values: parsed.values as Values, positionals: parsed.positionals };
}

export async function runCli(argv: string[]): Promise<number> {
  const json = argv.includes('--json');
  const out = output(json);
  let [groupName, verb, ...rest] = argv;
  if (verb !== undefined && groups[`${groupName} ${verb}`]) [groupName, verb, ...rest] = [`${groupName} ${verb}`, ...rest];
  try {
    if (!groupName || groupName === '--help' || groupName === '-h' || groupName === 'help') {
      process.stdout.write(`${usageText()}\n`);
      return groupName ? EXIT.ok : EXIT.usage;
    }
    if (groupName === 'start') {
      const { values } = parseCommand({ usage: 'start [--config FILE] [--json]', run: () => undefined }, argv.slice(1));
      return await runStart(resolveConfigPath(values.config as string | undefined), out, values.config as string | undefined);
    }
    const stateCommand = stateCommands[groupName];
    if (stateCommand) {
      // No index is opened here: backup reads the live one itself, restore creates one.
      const { values } = parseCommand({ ...stateCommand, run: () => undefined }, argv.slice(1));
      const config = loadConfig(resolveConfigPath(values.config as string | undefined));
      out.print(await stateCommand.run(config, values, commandLogger()));
      return EXIT.ok;
    }
    const group = groups[groupName];
    const cmd = group && verb ? group[verb] : undefined;
    if (!cmd) throw new UsageError(`unknown command "${[groupName, verb].filter(Boolean).join(' ')}"\n${usageText()}`);
    if (rest.includes('--help') || rest.includes('-h')) {
      process.stdout.write(`usage: postern ${cmd.usage}\n${cmd.help ? `\n${cmd.help()}\n` : ''}`);
      return EXIT.ok;
    }
    const { values, positionals } = parseCommand(cmd, rest);
    const config: PosternConfig = loadConfig(resolveConfigPath(values.config as string | undefined));
    const logger = commandLogger();
    // The configured backend, migrated as a node would migrate it (a command may come before the
    // first start). On PostgreSQL that is the database every node shares, so what a command
    // changes (a key revoked, a project paused) acts on every node's next request.
    const opened = await openThreadStore(storeLocationOf(config), logger, 'cli', { migrate: true });
    try {
      const result = await cmd.run({ store: opened.store, clock: clockFromEnvironment(), config, spoolRoot: new Spool(config.state_dir, logger).root }, values, positionals);
      if (result instanceof RawOutput) {
        await new Promise<void>((resolve, reject) => result.stream.on('error', reject).on('end', resolve).pipe(process.stdout, { end: false }));
      } else if (result instanceof TextOutput) {
        for await (const chunk of result.chunks) if (!process.stdout.write(chunk)) await new Promise((resolve) => process.stdout.once('drain', resolve));
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
