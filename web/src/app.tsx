/** The shell: sign-in or the signed-in app (navigation, project picker, the screen of the route). */
import { useEffect, useState } from 'preact/hooks';
import { api, get, setCsrfToken, whenSignedOut, type Api } from './api';
import { href, navigate, useRoute, type Route } from './router';
import { AppContext, isOwner, type AppState } from './session';
import { AuditScreen } from './screens/audit';
import { DkimScreen } from './screens/dkim';
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
import { ErrorNote, Loading } from './ui';

const PROJECT_KEY = 'postern.project';

export function App() {
  const [session, setSession] = useState<Api.Session | null | undefined>(undefined);
  const [projects, setProjects] = useState<Api.Project[]>([]);
  const [error, setError] = useState<unknown>(null);

  const loadProjects = () =>
    get<Api.ProjectList>('/projects').then(
      (p) => setProjects(p.projects),
      (err: unknown) => setError(err),
    );

  const signedIn = (s: Api.Session) => {
    setCsrfToken(s.csrf_token);
    setSession(s);
    void loadProjects();
  };

  useEffect(() => {
    whenSignedOut(() => {
      setCsrfToken(null);
      setSession(null);
    });
    get<Api.Session>('/session').then(signedIn, () => setSession(null));
  }, []);

  if (session === undefined) return <Loading what="the console" />;
  if (session === null) return <SignIn onSignedIn={signedIn} />;
  const state: AppState = { session, projects, reloadProjects: () => void loadProjects() };
  return (
    <AppContext.Provider value={state}>
      <Shell state={state} error={error} onSignOut={() => api('DELETE', '/session').finally(() => setSession(null))} />
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
  { path: '/operators', label: 'Operators', owner: true },
  { path: '/audit', label: 'Audit log', owner: true },
];

function Shell({ state, error, onSignOut }: { state: AppState; error: unknown; onSignOut: () => void }) {
  const route = useRoute();
  const routeProject = route.parts[0] === 'projects' && route.parts[1] ? route.parts[1] : null;
  const [picked, setPicked] = useState<string | null>(() => localStorage.getItem(PROJECT_KEY));
  const project = state.projects.find((p) => p.id === (routeProject ?? picked)) ?? state.projects[0] ?? null;
  useEffect(() => {
    if (project) localStorage.setItem(PROJECT_KEY, project.id);
  }, [project?.id]);
  const [menuOpen, setMenuOpen] = useState(false);
  useEffect(() => setMenuOpen(false), [location.hash]);

  const itemHref = (item: NavItem) => (item.project ? (project ? href(`/projects/${project.id}/${item.path}`) : null) : href(item.path));
  const active = (item: NavItem) => (item.project ? route.parts[0] === 'projects' && route.parts[2] === item.path : `/${route.parts[0] ?? 'overview'}` === item.path && !(route.parts[0] === 'projects' && route.parts[2]));

  return (
    <div class="shell">
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById('main')?.focus())}>
        Skip to content
      </a>
      <header class="top">
        <button type="button" class="menu-toggle" aria-expanded={menuOpen} aria-controls="nav" onClick={() => setMenuOpen(!menuOpen)}>
          Menu
        </button>
        <a class="brand" href="#/overview">
          Postern
        </a>
        <span class="who">
          <span class="muted">{state.session.operator.email}</span> <span class="badge">{state.session.operator.role}</span>
        </span>
        <button type="button" class="small" onClick={onSignOut}>
          Sign out
        </button>
      </header>
      <div class="body">
        <nav id="nav" class={`side${menuOpen ? ' open' : ''}`} aria-label="Console">
          <label class="field project-picker">
            <span class="field-label">Project</span>
            <select
              value={project?.id ?? ''}
              onChange={(e) => {
                const id = e.currentTarget.value;
                setPicked(id);
                if (routeProject && route.parts[2]) navigate(href(`/projects/${id}/${route.parts[2]}`));
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

function Screen({ route }: { route: Route }) {
  const [first, second, third] = route.parts;
  if (first === 'messages' && second) return <MessageScreen id={second} />;
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
    }
  }
  if (first === 'projects') return <ProjectsScreen />;
  if (first === 'operators') return <OperatorsScreen />;
  if (first === 'audit') return <AuditScreen />;
  return <OverviewScreen />;
}
