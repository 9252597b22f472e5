/**
 * Request paths on every HTTP and console listener: served only in their canonical spelling,
 * matched exactly, and logged with their secrets masked whatever the spelling. A path that
 * another reader (a proxy, a lenient router) could take for a different one is refused, never
 * normalised, so a route answers one spelling and the log cannot be fooled by another.
 */
import { maskPathSecrets, maskSecrets } from '../log.js';

/** A path's characters (RFC 3986 path-absolute: unreserved, sub-delims, ":", "@", "/", and "%" escapes). */
const PATH_CHARACTERS = /^[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*$/;
/** A percent escape and the character it stands for, when that is unreserved (so it has a plain spelling). */
const ESCAPE = /%(?:([0-9A-Fa-f]{2})|)/g;
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/** The path of a request target: up to its query string (or a fragment, which no client sends). */
export function requestPath(url: string | undefined): string {
  const target = url ?? '/';
  const end = target.search(/[?#]/);
  return end === -1 ? target : target.slice(0, end);
}

/**
 * Whether a request target's path is canonical: the form RFC 3986's normalisation (section
 * 6.2.2) leaves as it is, without empty segments. Refused (404), never normalised: a target
 * not starting with `/` (`*`, absolute form), `//` and a trailing `/`, `.` and `..` segments,
 * a percent escape of an unreserved character (`%2e`, `%41`: those have a plain spelling), a
 * malformed escape, a character outside RFC 3986 paths (`\`, `#`, `|`, …). Case is never
 * folded: `/V1/send` is another path (the routes match case-sensitively, exactRoute). An
 * escaped `/` (`%2F`) is a character of its segment, as RFC 3986 reads it.
 */
export function isCanonicalTarget(url: string | undefined): boolean {
  const target = url ?? '';
  if (target.includes('#')) return false;
  const path = requestPath(target);
  if (path === '/') return true;
  if (!path.startsWith('/') || !PATH_CHARACTERS.test(path)) return false;
  for (const segment of path.slice(1).split('/')) {
    if (segment === '' || segment === '.' || segment === '..') return false;
    for (const [, hex] of segment.matchAll(ESCAPE)) {
      if (hex === undefined || UNRESERVED.test(String.fromCharCode(parseInt(hex, 16)))) return false;
    }
  }
  return true;
}

/**
 * A route of polka's `/a/:param/b` form as a case-sensitive, exact RegExp (polka's own
 * patterns ignore case and take a trailing slash): its parameters are named groups, which
 * polka hands to the handler as `req.params`, percent-decoded.
 */
export function exactRoute(route: string): RegExp {
  const pattern = route
    .split('/')
    .slice(1)
    .map((segment) => {
      if (segment.startsWith(':')) {
        const name = segment.slice(1);
        if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`route ${route}: parameter ${segment} is not a plain name`);
        return `/(?<${name}>[^/]+)`;
      }
      if (segment === '' || /[*?:]/.test(segment)) throw new Error(`route ${route}: segment "${segment}" is not a literal`);
      return `/${segment.replace(/[.+^${}()|[\]\\]/g, '\\$&')}`;
    })
    .join('');
  return new RegExp(`^${pattern}$`);
}

/** Paths that hold no secret, logged as they are (the request line is written for every request). */
const PLAIN_PATHS = new Set(['/v1/send', '/v1/send/batch', '/healthz', '/readyz', '/openapi.json', '/metrics']);

/**
 * The request path as logged, on every listener: no query string, and a feedback endpoint's
 * secret or a viewer link's token masked in any spelling (maskPathSecrets), as are keys and
 * credentials (maskSecrets).
 */
export function loggedPath(url: string | undefined): string {
  const path = requestPath(url);
  return PLAIN_PATHS.has(path) ? path : maskSecrets(maskPathSecrets(path));
}
