/**
 * Asking before an action whose effect leaves the console (mail sent, mail dropped, a project
 * held): a modal dialog that names what the action will touch ("Release 1,834 messages?", the
 * recipients of one message), with the action's own verb on its button. One host for the app.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

export interface ConfirmRequest {
  title: string;
  body?: ComponentChildren;
  /** The confirming button's label: the action itself ("Release 3 messages"). */
  confirm: string;
  /** The button that changes nothing. */
  cancel?: string;
  danger?: boolean;
}

interface Pending extends ConfirmRequest {
  resolve(ok: boolean): void;
}

let show: ((p: Pending | null) => void) | null = null;

/** Resolves true when the operator confirms, false when they cancel (button, Escape). */
export function askConfirm(request: ConfirmRequest): Promise<boolean> {
  return new Promise((resolve) => {
    if (!show) return resolve(false);
    show({ ...request, resolve });
  });
}

export function ConfirmHost() {
  const [pending, setPending] = useState<Pending | null>(null);
  const dialog = useRef<HTMLDialogElement>(null);
  const confirmButton = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    show = (p) =>
      setPending((current) => {
        current?.resolve(false);
        return p;
      });
    return () => {
      show = null;
    };
  }, []);
  useEffect(() => {
    const d = dialog.current;
    if (!d) return;
    if (pending && !d.open) {
      d.showModal();
      confirmButton.current?.focus();
    }
    if (!pending && d.open) d.close();
  }, [pending]);
  const answer = (ok: boolean) => {
    pending?.resolve(ok);
    setPending(null);
  };
  return (
    <dialog
      ref={dialog}
      class="confirm"
      aria-labelledby="confirm-title"
      onCancel={(e) => {
        e.preventDefault();
        answer(false);
      }}
    >
      {pending && (
        <form
          method="dialog"
          onSubmit={(e) => {
            e.preventDefault();
            answer(true);
          }}
        >
          <h2 id="confirm-title">{pending.title}</h2>
          {pending.body && <div class="confirm-body">{pending.body}</div>}
          <div class="actions">
            <button ref={confirmButton} type="submit" class={pending.danger ? 'danger' : 'primary'}>
              {pending.confirm}
            </button>
            <button type="button" onClick={() => answer(false)}>
              {pending.cancel ?? 'Cancel'}
            </button>
          </div>
        </form>
      )}
    </dialog>
  );
}
