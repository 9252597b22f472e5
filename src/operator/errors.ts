/** A refusal of an operator command (CLI today, a web console later). */
export class OperatorError extends Error {
  constructor(
    readonly code: 'not_found' | 'invalid_argument' | 'conflict',
    message: string,
  ) {
    super(message);
  }
}

export function notFound(what: string, id: string): OperatorError {
  return new OperatorError('not_found', `${what} ${id} not found`);
}
