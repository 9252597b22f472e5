import aws4 from 'aws4';
import { type ApiConnectionCheck, jsonFields } from '../connectionCheck.js';
import { baseUrl } from '../httpApi.js';
import { amzDate, SES_DEFAULT_REGION } from './adapter.js';

/** Amazon SES v2 `GetAccount`, signed as the sends are: not ok while sending is paused. */
export const sesConnectionCheck: ApiConnectionCheck = (a, now) => {
  if (!a.settings.user || !a.secrets.api_key)
    return 'provider-a-api needs the access key id (--user) and the secret access key (--api-key)';
  const region = a.settings.region ?? SES_DEFAULT_REGION;
  const url = new URL(
    `${baseUrl(a.settings.endpoint, `https://email.${region}.amazonaws.com`)}/v2/email/account`,
  );
  const signed = aws4.sign(
    {
      host: url.host,
      method: 'GET',
      path: url.pathname,
      service: 'ses',
      region,
      headers: { 'X-Amz-Date': amzDate(now) },
    },
    { accessKeyId: a.settings.user, secretAccessKey: a.secrets.api_key },
  );
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(signed.headers ?? {}))
    if (name.toLowerCase() !== 'host' && value !== undefined) headers[name] = String(value);
  return {
    url: url.href,
    headers,
    judge: (res) => {
      if (res.status !== 200) return null;
      const body = jsonFields(res);
      const enabled = body.SendingEnabled !== false;
      return {
        ok: enabled,
        message: enabled
          ? `sending enabled${body.ProductionAccessEnabled === false ? ' (sandbox: verified recipients only)' : ''}`
          : 'sending is paused on this account',
      };
    },
  };
};
