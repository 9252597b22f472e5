/** The console's live updates (server-sent events): message changes as they happen. */
import { useEffect, useRef } from 'preact/hooks';
import { API_BASE, query } from './api';

export interface MessageChange {
  id: string;
  status: string;
  project_id: string;
  environment: 'production' | 'sandbox';
  type: string;
}

/** Calls `onChange` for each changed message and `onRefresh` after bulk actions, while mounted. */
export function useLiveMessages(filter: { project?: string; environment?: string }, onChange: (c: MessageChange) => void, onRefresh: () => void): void {
  const handlers = useRef({ onChange, onRefresh });
  handlers.current = { onChange, onRefresh };
  useEffect(() => {
    const source = new EventSource(`${API_BASE}/events/stream${query({ project: filter.project, environment: filter.environment })}`);
    source.addEventListener('message', (e) => handlers.current.onChange(JSON.parse((e as MessageEvent<string>).data) as MessageChange));
    source.addEventListener('refresh', () => handlers.current.onRefresh());
    return () => source.close();
  }, [filter.project, filter.environment]);
}
