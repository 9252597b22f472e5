/** A refusal of an operator command (the CLI, the console API). */
export class OperatorError extends Error {
  constructor(
    readonly code: 'not_found' | 'invalid_argument' | 'conflict' | 'forbidden',
    message: string,
    /** For `invalid_argument`: the argument at fault (the console names it in `details`). */
    readonly field?: string,
    /** And what is wrong with it (the console's detail code `<field>:<reason>`). */
    readonly reason = 'invalid_value',
  ) {
    super(message);
  }
}

export function notFound(what: string, id: string): OperatorError {
  return new OperatorError('not_found', `${what} ${id} not found`);
}
