/** Moved to store/databaseUnavailable.ts (backend-neutral); re-exported while callers move over. */
export { DatabaseUnavailable, databaseUnavailable } from '../databaseUnavailable.js';
