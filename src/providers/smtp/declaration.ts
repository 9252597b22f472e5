/** The generic `smtp` slug: any relay the account names (`--host` is required). Slug and fields: declaration.json. */
import type { ProviderCode } from '../declaration.js';

export const provider = {
  smtp: { defaults: null },
} satisfies ProviderCode;
