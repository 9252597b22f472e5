import { type ApiConnectionCheck, ok2xx } from '../connectionCheck.js';
import { baseUrl } from '../httpApi.js';
import { POSTMARK_API } from './adapter.js';

/** Postmark: the server the token belongs to. */
export const postmarkConnectionCheck: ApiConnectionCheck = (a) => ({
  url: `${baseUrl(a.settings.endpoint, POSTMARK_API)}/server`,
  headers: { 'x-postmark-server-token': a.secrets.api_key ?? '', accept: 'application/json' },
  judge: ok2xx('server token accepted'),
});
