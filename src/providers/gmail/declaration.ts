/** provider-g: Gmail / Google Workspace, its SMTP relay only (no API, no feedback). Slug and fields: declaration.json. */
import type { ProviderCode } from '../declaration.js';

export const provider = {
  smtp: { defaults: { host: () => 'smtp.gmail.com', port: 587, tls: 'starttls' } },
} satisfies ProviderCode;
