import { type ApiConnectionCheck, jsonFields } from '../connectionCheck.js';
import { baseUrl } from '../httpApi.js';
import { MAILGUN_EU, MAILGUN_US } from './adapter.js';

/** Mailgun: the sending domain, ok when active. A domain sending key may only send, so it is refused here. */
export const mailgunConnectionCheck: ApiConnectionCheck = (a) => ({
  url: `${baseUrl(a.settings.endpoint, a.settings.region?.toLowerCase() === 'eu' ? MAILGUN_EU : MAILGUN_US)}/v3/domains/${encodeURIComponent(a.settings.domain ?? '')}`,
  headers: {
    authorization: `Basic ${Buffer.from(`api:${a.secrets.api_key ?? ''}`).toString('base64')}`,
    accept: 'application/json',
  },
  judge: (res) => {
    if (res.status !== 200) return null;
    const domain = jsonFields(res).domain as { state?: unknown } | undefined;
    const state = typeof domain?.state === 'string' ? domain.state : 'unknown';
    return { ok: state === 'active', message: `domain ${a.settings.domain} is ${state}` };
  },
  refusalHint:
    'a domain sending key may only send, so it cannot be checked: check with a private API key, or send a test message',
});
