/**
 * The sign-in form: the first screen, and, when a session ends while the app is open, a dialog
 * over the screen the operator was on (which stays as it was, with what they had typed), saying
 * why they must sign in again.
 */
import { useEffect, useRef } from 'preact/hooks';
import { type Api, post } from '../api';
import { ErrorNote, Field, formValues, useAction, usePageTitle } from '../ui';

export function SignIn({
  onSignedIn,
  notice,
  email,
  again,
}: {
  onSignedIn: (s: Api.Session) => void;
  notice?: string | null;
  email?: string;
  again?: boolean;
}) {
  const action = useAction();
  usePageTitle(again ? null : 'Sign in');
  const emailInput = useRef<HTMLInputElement>(null);
  const passwordInput = useRef<HTMLInputElement>(null);
  useEffect(() => (email ? passwordInput.current : emailInput.current)?.focus(), []);
  const form = (
    <form
      onSubmit={async (e) => {
        const v = formValues(e);
        const session = await action.run(() =>
          post<Api.Session>('/session', { email: v.email, password: v.password }),
        );
        if (session) onSignedIn(session);
      }}
    >
      {notice && (
        <p class="note" role="status">
          {notice}
        </p>
      )}
      <Field label="Email">
        <input
          ref={emailInput}
          name="email"
          type="email"
          autoComplete="username"
          required
          defaultValue={email}
        />
      </Field>
      <Field label="Password">
        <input
          ref={passwordInput}
          name="password"
          type="password"
          autoComplete="current-password"
          required
        />
      </Field>
      <ErrorNote error={action.error} />
      <button type="submit" class="primary" disabled={action.busy}>
        {action.busy ? 'Signing in…' : 'Sign in'}
      </button>
    </form>
  );
  if (again) {
    return (
      <div
        class="sign-in-again"
        role="dialog"
        aria-modal="true"
        aria-labelledby="sign-in-again-title"
      >
        <div class="sign-in">
          <h1 id="sign-in-again-title">Sign in again</h1>
          {form}
        </div>
      </div>
    );
  }
  return (
    <main class="sign-in">
      <h1>Postern console</h1>
      {form}
      <p class="muted small-print">
        No account yet? On the server:{' '}
        <code>postern operator create --email you@example.com --role owner</code>
      </p>
    </main>
  );
}
