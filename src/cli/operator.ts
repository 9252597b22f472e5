import { auditLog } from '../operator/audit.js';
import {
  createOperator,
  createOperatorToken,
  operatorList,
  operatorTokens,
  removeOperator,
  resetOperatorPassword,
  revokeOperatorTokenById,
  updateOperator,
} from '../operator/operators.js';
import { type CommandGroup, int, readStdin, str, strs } from './command.js';

export const operatorCommands: CommandGroup = {
  create: {
    usage: 'operator create --email E --role owner|member [--project ID …] [--password-stdin]',
    options: {
      email: { type: 'string' },
      role: { type: 'string' },
      project: { type: 'string', multiple: true },
      'password-stdin': { type: 'boolean' },
    },
    required: ['email', 'role'],
    // Prints {"id","email","password"}: the one-time password, once (none when it came from standard input).
    run: async (ctx, v) => {
      const created = await createOperator(ctx, {
        email: str(v.email)!,
        role: str(v.role)!,
        projects: strs(v.project),
        password: v['password-stdin'] ? await readStdin() : undefined,
      });
      return created.password === undefined
        ? { id: created.id, email: created.email }
        : { id: created.id, email: created.email, password: created.password };
    },
  },
  list: { usage: 'operator list', run: (ctx) => operatorList(ctx) },
  update: {
    usage: 'operator update ID [--role owner|member] [--project ID …]',
    positionals: ['ID'],
    options: { role: { type: 'string' }, project: { type: 'string', multiple: true } },
    run: (ctx, v, [id]) =>
      updateOperator(ctx, id, {
        role: str(v.role),
        projects: v.project === undefined ? undefined : strs(v.project),
      }),
  },
  remove: {
    usage: 'operator remove ID',
    positionals: ['ID'],
    run: (ctx, _v, [id]) => removeOperator(ctx, id),
  },
  'reset-password': {
    usage: 'operator reset-password ID [--password-stdin] [--keep-tokens]',
    positionals: ['ID'],
    options: { 'password-stdin': { type: 'boolean' }, 'keep-tokens': { type: 'boolean' } },
    // Prints the one-time password (unless chosen) and how many sessions ended and tokens were revoked.
    run: async (ctx, v, [id]) =>
      resetOperatorPassword(ctx, id, v['password-stdin'] ? await readStdin() : undefined, {
        keepTokens: v['keep-tokens'] === true,
      }),
  },
};

export const operatorTokenCommands: CommandGroup = {
  create: {
    usage: 'operator token create --operator ID --name NAME [--expires ISO]',
    options: {
      operator: { type: 'string' },
      name: { type: 'string' },
      expires: { type: 'string' },
    },
    required: ['operator', 'name'],
    run: (ctx, v) => createOperatorToken(ctx, str(v.operator)!, str(v.name)!, str(v.expires)),
  },
  list: {
    usage: 'operator token list --operator ID',
    options: { operator: { type: 'string' } },
    required: ['operator'],
    run: (ctx, v) => operatorTokens(ctx, str(v.operator)!),
  },
  revoke: {
    usage: 'operator token revoke TOKEN_ID',
    positionals: ['TOKEN_ID'],
    run: (ctx, _v, [id]) => revokeOperatorTokenById(ctx, id),
  },
};

export const auditCommands: CommandGroup = {
  list: {
    usage:
      'audit list [--limit N] [--cursor C] [--actor OPERATOR_ID|cli] [--actor-email EMAIL] [--action A]',
    options: {
      limit: { type: 'string' },
      cursor: { type: 'string' },
      actor: { type: 'string' },
      'actor-email': { type: 'string' },
      action: { type: 'string' },
    },
    run: (ctx, v) =>
      auditLog(ctx, {
        limit: int('limit', v.limit),
        cursor: str(v.cursor),
        actor: str(v.actor),
        actorEmail: str(v['actor-email']),
        action: str(v.action),
      }),
  },
};
