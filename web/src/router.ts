/** Hash routes (`#/messages/m_…?status=queued`): the server serves one page, reloads keep the place. */
import { useEffect, useState } from 'preact/hooks';

export interface Route {
  /** Path segments: `#/projects/p_1/keys` → ['projects', 'p_1', 'keys']. */
  parts: string[];
  params: URLSearchParams;
}

export function currentRoute(): Route {
  const hash = location.hash.replace(/^#\/?/, '');
  const [path, search = ''] = hash.split('?');
  return {
    parts: path.split('/').filter(Boolean).map(decodeURIComponent),
    params: new URLSearchParams(search),
  };
}

export function useRoute(): Route {
  const [route, setRoute] = useState(currentRoute);
  useEffect(() => {
    const onChange = () => setRoute(currentRoute());
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

export function href(path: string, params?: Record<string, string | string[] | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params ?? {})) {
    if (v === undefined || v === '') continue;
    if (Array.isArray(v)) for (const x of v) q.append(k, x);
    else q.set(k, v);
  }
  const s = q.toString();
  return `#${path}${s ? `?${s}` : ''}`;
}

/** Goes to `to`; `replace`: instead of the current entry (Back does not return to a page that is gone). */
export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  if (!opts.replace) {
    location.hash = to.replace(/^#/, '');
    return;
  }
  history.replaceState(history.state, '', `#${to.replace(/^#/, '')}`);
  window.dispatchEvent(new HashChangeEvent('hashchange'));
}
