export interface BoundListener {
  name: string;
  protocol: 'http' | 'smtp' | 'console';
  /** The environment a door serves (none for the console). */
  environment?: 'production' | 'sandbox';
  host: string;
  port: number;
  /** `http(s)://…` for HTTP and console listeners, `smtp://…` (STARTTLS) or `smtps://…` (implicit TLS) for SMTP. */
  url: string;
}

/** http.redirect_plain's listener, as bound. */
export interface BoundPlainListener {
  host: string;
  port: number;
  url: string;
}
