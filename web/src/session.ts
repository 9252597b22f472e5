import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import type { Api } from './api';

export interface AppState {
  session: Api.Session;
  projects: Api.Project[];
  reloadProjects(): void;
  /** Reads the session again (after a password change). */
  refreshSession(): void;
}

export const AppContext = createContext<AppState | null>(null);

export function useApp(): AppState {
  const state = useContext(AppContext);
  if (!state) throw new Error('outside the signed-in app');
  return state;
}

export const isOwner = (s: AppState) => s.session.operator.role === 'owner';
