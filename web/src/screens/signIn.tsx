import { useEffect, useRef } from 'preact/hooks';
import { post, type Api } from '../api';
import { ErrorNote, Field, formValues, useAction } from '../ui';

export function SignIn({ onSignedIn }: { onSignedIn: (s: Api.Session) => void }) {
  const action = useAction();
  const email = useRef<HTMLInputElement>(null);
  useEffect(() => email.current?.focus(), []);
  return (
    <main class="sign-in">
      <h1>Postern console</h1>
      <form
        onSubmit={async (e) => {
          const v = formValues(e);
          const session = await action.run(() => post<Api.Session>('/session', { email: v.email, password: v.password }));
          if (session) onSignedIn(session);
        }}
      >
        <Field label="Email">
          <input ref={email} name="email" type="email" autoComplete="username" required />
        </Field>
        <Field label="Password">
          <input name="password" type="password" autoComplete="current-password" required />
        </Field>
        <ErrorNote error={action.error} />
        <button type="submit" class="primary" disabled={action.busy}>
          {action.busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      <p class="muted small-print">
        No account yet? On the server: <code>postern operator create --email you@example.com --role owner</code>
      </p>
    </main>
  );
}
