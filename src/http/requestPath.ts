/** Request paths: only the canonical spelling is served and a path another reader could take for a different one is refused, never normalised. */
import { maskPathSecrets, maskSecrets } from '../log.js';

/** RFC 3986 path-absolute: unreserved, sub-delims, ":", "@", "/", and "%" escapes. */
const PATH_CHARACTERS = /^[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*$/;
const ESCAPE = /%(?:([0-9A-Fa-f]{2})|)/g;
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

export function requestPath(url: string | undefined): string {
  const target = url ?? '/';
  const end = target.search(/[?#]/);
  return end === -1 ? target : target.slice(0, end);
}

/** The form RFC 3986's normalisation (6.2.2) leaves as it is, without empty segments; case is never folded; `%2F` is a segment's character. */
export function isCanonicalTarget(url: string | undefined): boolean {
  const target = url ?? '';
  if (target.includes('#')) return false;
  const path = requestPath(target);
  if (path === '/') return true;
  if (!path.startsWith('/') || !PATH_CHARACTERS.test(path)) return false;
  for (const segment of path.slice(1).split('/')) {
    if (segment === '' || segment === '.' || segment === '..') return false;
    for (const [, hex] of segment.matchAll(ESCAPE)) {
      if (hex === undefined || UNRESERVED.test(String.fromCharCode(parseInt(hex, 16))))
        return false;
    }
  }
  return true;
}

/** polka's patterns ignore case and take a trailing slash; this one is exact. */
export function exactRoute(route: string): RegExp {
  const pattern = route
    .split('/')
    .slice(1)
    .map((segment) => {
      if (segment.startsWith(':')) {
        const name = segment.slice(1);
        if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
          throw new Error(`route ${route}: parameter ${segment} is not a plain name`);
        return `/(?<${name}>[^/]+)`;
      }
      if (segment === '' || /[*?:]/.test(segment))
        throw new Error(`route ${route}: segment "${segment}" is not a literal`);
      return `/${segment.replace(/[.+^${}()|[\]\\]/g, '\\$&')}`;
    })
    .join('');
  return new RegExp(`^${pattern}$`);
}

const PLAIN_PATHS = new Set([
  '/v1/send',
  '/v1/send/batch',
  '/healthz',
  '/readyz',
  '/openapi.json',
  '/metrics',
]);

/** No query string; secrets masked in any spelling. */
export function loggedPath(url: string | undefined): string {
  const path = requestPath(url);
  return PLAIN_PATHS.has(path) ? path : maskSecrets(maskPathSecrets(path));
}
