import { type ApiConnectionCheck, jsonFields } from '../connectionCheck.js';
import { baseUrl } from '../httpApi.js';
import { RESEND_API } from './adapter.js';

/** Resend: the account's domains. A sending-only key is refused with `restricted_api_key`, which proves it valid. */
export const resendConnectionCheck: ApiConnectionCheck = (a) => ({
  url: `${baseUrl(a.settings.endpoint, RESEND_API)}/domains`,
  headers: { authorization: `Bearer ${a.secrets.api_key ?? ''}` },
  judge: (res) => {
    if (res.status === 200) return { ok: true, message: 'key accepted (full access)' };
    if (res.status === 401 && jsonFields(res).name === 'restricted_api_key')
      return { ok: true, message: 'key accepted (sending access only)' };
    return null;
  },
});
