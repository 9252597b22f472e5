/**
 * The shell: sign-in, the password change a generated password needs first, or the signed-in
 * app (navigation, project picker, the screen of the route). A session that ends while the app
 * is open brings the sign-in form over the screen, which stays as it was (what was typed
 * included) for the same operator; a server that cannot be reached brings a banner until it
 * answers again.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { type Api, api, get, setCsrfToken, whenPasswordChangeRequired, whenSignedOut } from './api';
import { ConfirmHost } from './confirm';
import { announceReconnected, useReachable } from './connection';
import { closeLiveStream, useLiveStream } from './live';
import { href, navigate, type Route, useRoute } from './router';
import { AccountScreen, ForcedPasswordChange } from './screens/account';
import { AuditScreen } from './screens/audit';
import { DkimScreen } from './screens/dkim';
import { DomainsScreen } from './screens/domains';
import { KeysScreen } from './screens/keys';
import { MessageScreen } from './screens/message';
import { MessagesScreen } from './screens/messages';
import { OperatorsScreen } from './screens/operators';
import { OverviewScreen } from './screens/overview';
import { ProjectsScreen } from './screens/projects';
import { ProvidersScreen } from './screens/providers';
import { SignIn } from './screens/signIn';
import { SuppressionsScreen } from './screens/suppressions';
import { WebhooksScreen } from './screens/webhooks';
import { AppContext, type AppState, isOwner, useApp } from './session';
import { ErrorNote, Loading, usePageTitle } from './ui';

const PROJECT_KEY = 'postern.project';
/**
 * Set while this browser has a session: without it the app opens on the sign-in form without
 * asking the server (which would answer 401, an error in the browser's console for nothing).
 */
const SIGNED_IN_KEY = 'postern.signed-in';
/** Why the last session ended, when the app saw it end (its sign-in form says so, after a reload too). */
const SIGNED_OUT_KEY = 'postern.signed-out';

function signedOutNotice(code: string, idleSeconds: number | null | undefined): string {
  if (code === 'session_expired') {
    const idle = idleSeconds
      ? ` after ${idleSeconds >= 3600 ? `${Math.round(idleSeconds / 3600)} h` : `${Math.round(idleSeconds / 60)} min`} without use`
      : '';
    return `Your session expired${idle}. Sign in again to carry on where you were.`;
  }
  return 'You were signed out (the session was ended, or your password was changed or reset). Sign in again to carry on.';
}

export function App() {
  const [session, setSession] = useState<Api.Session | null | undefined>(undefined);
  const [projects, setProjects] = useState<Api.Project[]>([]);
  const [error, setError] = useState<unknown>(null);
  /** Why the sign-in form is shown (a session that ended), when it is. */
  const [notice, setNotice] = useState<string | null>(null);
  /** The session ended while the app was open: the sign-in form over it, saying why. */
  const [lapsed, setLapsed] = useState<string | null>(null);
  const current = useRef<Api.Session | null | undefined>(undefined);
  current.current = session;
  const lapsedNow = useRef<string | null>(null);
  lapsedNow.current = lapsed;

  const loadProjects = () =>
    get<Api.ProjectList>('/projects').then(
      (p) => {
        setProjects(p.projects);
        setError(null);
      },
      (err: unknown) => setError(err),
    );

  const signedIn = (s: Api.Session) => {
    const same = current.current?.operator.id === s.operator.id;
    localStorage.setItem(SIGNED_IN_KEY, '1');
    localStorage.removeItem(SIGNED_OUT_KEY);
    setCsrfToken(s.csrf_token);
    setSession(s);
    setNotice(null);
    if (lapsedNow.current !== null && same) {
      // The same operator again: the screen stays as it was, and reads what it shows again.
      setLapsed(null);
      announceReconnected();
      return;
    }
    setLapsed(null);
    if (!s.operator.must_change_password) void loadProjects();
  };

  const signedOut = () => {
    localStorage.removeItem(SIGNED_IN_KEY);
    localStorage.removeItem(SIGNED_OUT_KEY);
    setCsrfToken(null);
    setLapsed(null);
    setSession(null);
  };

  const refreshSession = () => get<Api.Session>('/session').then(signedIn, () => undefined);

  useEffect(() => {
    whenSignedOut((code) => {
      setCsrfToken(null);
      const s = current.current;
      const text = signedOutNotice(code, s?.idle_timeout_seconds);
      localStorage.removeItem(SIGNED_IN_KEY);
      localStorage.setItem(SIGNED_OUT_KEY, text);
      if (s) setLapsed(text);
      else setNotice(text);
    });
    whenPasswordChangeRequired(() => void refreshSession());
    if (localStorage.getItem(SIGNED_IN_KEY) === null) {
      setNotice(localStorage.getItem(SIGNED_OUT_KEY));
      setSession(null);
    } else get<Api.Session>('/session').then(signedIn, () => setSession(null));
  }, []);

  if (session === undefined) return <Loading what="the console" />;
  if (session === null) return <SignIn onSignedIn={signedIn} notice={notice} />;
  const signOut = () => {
    closeLiveStream();
    void api('DELETE', '/session').then(signedOut, signedOut);
  };
  if (session.operator.must_change_password && lapsed === null)
    return (
      <ForcedPasswordChange
        session={session}
        onChanged={() => void refreshSession()}
        onSignOut={signOut}
      />
    );
  const state: AppState = {
    session,
    projects,
    reloadProjects: () => void loadProjects(),
    refreshSession: () => void refreshSession(),
  };
  return (
    <AppContext.Provider value={state}>
      {/* Another operator signing in gets a fresh app, not the last one's screen. */}
      <Shell
        key={session.operator.id}
        state={state}
        error={error}
        inert={lapsed !== null}
        onSignOut={signOut}
      />
      {lapsed !== null && (
        <SignIn again notice={lapsed} email={session.operator.email} onSignedIn={signedIn} />
      )}
      <ConfirmHost />
    </AppContext.Provider>
  );
}

interface NavItem {
  path: string;
  label: string;
  /** Shown to owners only. */
  owner?: boolean;
  /** Needs a project. */
  project?: boolean;
}

const NAV: NavItem[] = [
  { path: '/overview', label: 'Overview' },
  { path: '/messages', label: 'Messages' },
  { path: 'inbox', label: 'Sandbox inbox', project: true },
  { path: '/projects', label: 'Projects' },
  { path: 'keys', label: 'API keys', project: true },
  { path: 'providers', label: 'Providers', project: true, owner: true },
  { path: 'webhooks', label: 'Webhooks', project: true },
  { path: 'suppressions', label: 'Suppressions', project: true },
  { path: 'dkim', label: 'DKIM', project: true },
  { path: 'domains', label: 'Domains', project: true },
  { path: '/operators', label: 'Operators', owner: true },
  { path: '/audit', label: 'Audit log', owner: true },
];

/** The banner while the server cannot be reached (the connection monitor retries by itself). */
function Offline() {
  const reachable = useReachable();
  if (reachable) return null;
  return (
    <div class="offline" role="alert">
      <strong>Cannot reach the Postern server.</strong> Retrying every few seconds; what you change
      now is not saved.
    </div>
  );
}

function Shell({
  state,
  error,
  inert,
  onSignOut,
}: {
  state: AppState;
  error: unknown;
  inert: boolean;
  onSignOut: () => void;
}) {
  useLiveStream();
  const route = useRoute();
  const routeProject = route.parts[0] === 'projects' && route.parts[1] ? route.parts[1] : null;
  const [picked, setPicked] = useState<string | null>(() => localStorage.getItem(PROJECT_KEY));
  const project =
    state.projects.find((p) => p.id === (routeProject ?? picked)) ?? state.projects[0] ?? null;
  useEffect(() => {
    if (project) localStorage.setItem(PROJECT_KEY, project.id);
  }, [project?.id]);
  const [menuOpen, setMenuOpen] = useState(false);
  useEffect(() => setMenuOpen(false), [location.hash]);

  const itemHref = (item: NavItem) =>
    item.project
      ? project
        ? href(`/projects/${project.id}/${item.path}`)
        : null
      : href(item.path);
  const active = (item: NavItem) =>
    item.project
      ? route.parts[0] === 'projects' && route.parts[2] === item.path
      : `/${route.parts[0] ?? 'overview'}` === item.path &&
        !(route.parts[0] === 'projects' && route.parts[2]);

  return (
    <div class="shell" inert={inert}>
      {/* biome-ignore lint/a11y/useValidAnchor: the router owns the URL's hash, so the skip link moves focus itself */}
      <a
        class="skip"
        href="#main"
        onClick={(e) => {
          e.preventDefault();
          document.getElementById('main')?.focus();
        }}
      >
        Skip to content
      </a>
      <header class="top">
        <button
          type="button"
          class="menu-toggle"
          aria-expanded={menuOpen}
          aria-controls="nav"
          onClick={() => setMenuOpen(!menuOpen)}
        >
          Menu
        </button>
        <a class="brand" href="#/overview">
          Postern
        </a>
        <span class="who">
          <a class="muted" href={href('/account')} title="Your account: change your password">
            {state.session.operator.email}
          </a>{' '}
          <span class="badge">{state.session.operator.role}</span>
        </span>
        <button type="button" class="small" onClick={onSignOut}>
          Sign out
        </button>
      </header>
      <Offline />
      <div class="body">
        <nav id="nav" class={`side${menuOpen ? ' open' : ''}`} aria-label="Console">
          <label class="field project-picker">
            <span class="field-label">Project</span>
            <select
              value={project?.id ?? ''}
              onChange={(e) => {
                const id = e.currentTarget.value;
                setPicked(id);
                if (routeProject && route.parts[2])
                  navigate(href(`/projects/${id}/${route.parts[2]}`));
              }}
            >
              {state.projects.length === 0 && <option value="">No projects</option>}
              {state.projects.map((p) => (
                <option key={p.id} value={p.id}>
                  {p.name}
                </option>
              ))}
            </select>
          </label>
          <ul>
            {NAV.filter((i) => !i.owner || isOwner(state)).map((item) => {
              const to = itemHref(item);
              return (
                <li key={item.path}>
                  {to ? (
                    <a href={to} aria-current={active(item) ? 'page' : undefined}>
                      {item.label}
                    </a>
                  ) : (
                    <span class="muted">{item.label}</span>
                  )}
                </li>
              );
            })}
          </ul>
        </nav>
        <main id="main" tabIndex={-1}>
          <ErrorNote error={error} />
          <Screen route={route} />
        </main>
      </div>
    </div>
  );
}

const SECTION_TITLES: Record<string, string> = {
  inbox: 'Sandbox inbox',
  keys: 'API keys',
  providers: 'Providers',
  webhooks: 'Webhooks',
  suppressions: 'Suppressions',
  dkim: 'DKIM',
};
const TOP_TITLES: Record<string, string> = {
  messages: 'Messages',
  projects: 'Projects',
  operators: 'Operators',
  audit: 'Audit log',
  account: 'Your account',
};

/** The title of a route's screen ("API keys — shop"); a message's screen names its subject itself. */
function titleOf(route: Route, projects: Api.Project[]): string | null {
  const [first, second, third] = route.parts;
  if (first === 'messages' && second) return null;
  if (first === 'projects' && second && third && SECTION_TITLES[third])
    return `${SECTION_TITLES[third]} — ${projects.find((p) => p.id === second)?.name ?? second}`;
  const page = route.params.get('cursor') ? `, page ${route.params.get('page') ?? 2}` : '';
  return `${TOP_TITLES[first ?? ''] ?? 'Overview'}${page}`;
}

function Screen({ route }: { route: Route }) {
  const [first, second, third] = route.parts;
  usePageTitle(titleOf(route, useApp().projects));
  // Keyed by id: each message opens clean (no share link, remote images or tab of the last one).
  if (first === 'messages' && second) return <MessageScreen key={second} id={second} />;
  if (first === 'messages') return <MessagesScreen route={route} />;
  if (first === 'projects' && second && third) {
    switch (third) {
      case 'inbox':
        return <MessagesScreen route={route} inboxProject={second} />;
      case 'keys':
        return <KeysScreen projectId={second} />;
      case 'providers':
        return <ProvidersScreen projectId={second} />;
      case 'webhooks':
        return <WebhooksScreen projectId={second} />;
      case 'suppressions':
        return <SuppressionsScreen projectId={second} />;
      case 'dkim':
        return <DkimScreen projectId={second} />;
      case 'domains':
        return <DomainsScreen projectId={second} />;
    }
  }
  if (first === 'projects') return <ProjectsScreen />;
  if (first === 'operators') return <OperatorsScreen />;
  if (first === 'audit') return <AuditScreen />;
  if (first === 'account') return <AccountScreen />;
  return <OverviewScreen />;
}
