import { type ApiConnectionCheck, jsonFields } from '../connectionCheck.js';
import { baseUrl } from '../httpApi.js';
import { SENDGRID_API, SENDGRID_API_EU } from './adapter.js';

/** SendGrid: the key's scopes; sending needs `mail.send`. */
export const sendgridConnectionCheck: ApiConnectionCheck = (a) => ({
  url: `${baseUrl(a.settings.endpoint, a.settings.region?.toLowerCase() === 'eu' ? SENDGRID_API_EU : SENDGRID_API)}/v3/scopes`,
  headers: { authorization: `Bearer ${a.secrets.api_key ?? ''}` },
  judge: (res) => {
    if (res.status !== 200) return null;
    const scopes = jsonFields(res).scopes;
    const canSend = Array.isArray(scopes) && scopes.includes('mail.send');
    return {
      ok: canSend,
      message: canSend
        ? 'key accepted, with the mail.send scope'
        : 'key accepted, but it lacks the mail.send scope',
    };
  },
});
