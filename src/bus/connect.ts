/**
 * Opening a NATS connection the way every process of this project does: unlimited
 * reconnects, no async stack traces on the hot path, authentication from the environment
 * (user/password, token, nkey seed or creds file), and the inbox prefix NATS permissions expect.
 */
import { readFileSync } from 'node:fs';
import { type Authenticator, credsAuthenticator, type NatsConnection, nkeyAuthenticator } from '@nats-io/nats-core';
import { connect as natsConnect } from '@nats-io/transport-node';

/** Where and how to connect. Every field has an environment variable, named beside it. */
export interface ConnectOptions {
  /** Server URL(s), comma-separated (`NATS_URL`); default `nats://127.0.0.1:4222`. */
  servers?: string;
  /** Connection name shown by the server's monitoring. */
  name?: string;
  /** User and password (`NATS_USER`, `NATS_PASSWORD`). */
  user?: string;
  pass?: string;
  /** Token (`NATS_TOKEN`). */
  token?: string;
  /** Path of an nkey seed file (`NATS_NKEY`). */
  nkeyFile?: string;
  /** Path of a JWT creds file (`NATS_CREDS`). */
  credsFile?: string;
  /**
   * Prefix of reply subjects (`NATS_INBOX_PREFIX`), e.g. `_INBOX_agent` where a user may subscribe
   * only to its own; default `_INBOX`.
   */
  inboxPrefix?: string;
}

/** The default server. */
export const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';

/** Connect options from the environment (`NATS_URL`, `NATS_USER`, …). */
export function connectOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): ConnectOptions {
  const o: ConnectOptions = { servers: env.NATS_URL || DEFAULT_NATS_URL };
  if (env.NATS_USER) o.user = env.NATS_USER;
  if (env.NATS_PASSWORD) o.pass = env.NATS_PASSWORD;
  if (env.NATS_TOKEN) o.token = env.NATS_TOKEN;
  if (env.NATS_NKEY) o.nkeyFile = env.NATS_NKEY;
  if (env.NATS_CREDS) o.credsFile = env.NATS_CREDS;
  if (env.NATS_INBOX_PREFIX) o.inboxPrefix = env.NATS_INBOX_PREFIX;
  return o;
}

/**
 * Connects; rejects at once if no server answers the first time. Without options, everything
 * comes from the `NATS_*` environment (`connectOptionsFromEnv`); with options, only `servers`
 * falls back to it (`NATS_URL`, then `DEFAULT_NATS_URL`).
 */
export function connectBus(options: ConnectOptions = connectOptionsFromEnv()): Promise<NatsConnection> {
  const authenticators: Authenticator[] = [];
  if (options.credsFile) authenticators.push(credsAuthenticator(readFileSync(options.credsFile)));
  if (options.nkeyFile)
    authenticators.push(nkeyAuthenticator(new TextEncoder().encode(readFileSync(options.nkeyFile, 'utf8').trim())));
  return natsConnect({
    servers: (options.servers ?? connectOptionsFromEnv().servers ?? DEFAULT_NATS_URL).split(',').map((s) => s.trim()),
    name: options.name,
    user: options.user,
    pass: options.pass,
    token: options.token,
    authenticator: authenticators.length > 0 ? authenticators : undefined,
    ...(options.inboxPrefix ? { inboxPrefix: options.inboxPrefix } : {}),
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    noAsyncTraces: true,
  });
}
