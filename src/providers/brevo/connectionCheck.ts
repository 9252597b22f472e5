import { type ApiConnectionCheck, ok2xx } from '../connectionCheck.js';
import { baseUrl } from '../httpApi.js';
import { BREVO_API } from './adapter.js';

/** Brevo: the account. */
export const brevoConnectionCheck: ApiConnectionCheck = (a) => ({
  url: `${baseUrl(a.settings.endpoint, BREVO_API)}/v3/account`,
  headers: { 'api-key': a.secrets.api_key ?? '', accept: 'application/json' },
  judge: ok2xx('API key accepted'),
});
