/**
 * Keeps one server connected (PROTOCOL 12 "Supervision"): connects, and when the connection
 * closes (the process exited, it wrote garbage, `initialize` hung, a remote server stopped
 * answering) connects again after a wait that starts at 1 s and doubles to 60 s, reset once a
 * connection stayed up a minute.
 */
import type { Logger } from '../../bus/log.js';
import type { ServerConfig } from './config.js';
import { ClientCredentialsClient } from './oauth-client.js';
import { Upstream } from './upstream.js';

/** Where a server stands. */
export const ServerState = {
  /** The first connection is being made. */
  Starting: 'starting',
  /** Connected, tools read: calls go through. */
  Ready: 'ready',
  /** The connection closed; another is being made after the backoff. */
  Restarting: 'restarting',
  /** The last attempt failed (spawn, `initialize`, listing); retried after the backoff. */
  Failed: 'failed',
} as const;
export type ServerState = (typeof ServerState)[keyof typeof ServerState];

/** How a supervisor waits. */
export interface SupervisorTiming {
  /** Longest `initialize` may take before the server is killed, in ms; default 30000. */
  initializeTimeoutMs: number;
  /** First wait before a restart, in ms; default 1000. */
  firstBackoffMs: number;
  /** Longest wait before a restart, in ms; default 60000. */
  maxBackoffMs: number;
  /** How often a ready remote server is pinged, in ms (one that is gone is restarted); default 30000; 0: never. */
  pingIntervalMs: number;
}

/** The default timing of PROTOCOL 12. */
export const DEFAULT_TIMING: SupervisorTiming = {
  initializeTimeoutMs: 30_000,
  firstBackoffMs: 1_000,
  maxBackoffMs: 60_000,
  pingIntervalMs: 30_000,
};

/** A connection stayed up this long: the next restart waits the first backoff again. */
const STABLE_MS = 60_000;

/** What the supervisor tells its server's host. */
export interface SupervisorHooks {
  /** A new connection initialized: read its tools; a rejection closes it and counts as a failed attempt. */
  onConnected(upstream: Upstream): Promise<void>;
  /** The server said its tools changed. */
  onToolsChanged(upstream: Upstream): void;
  /** The state changed. */
  onState(state: ServerState): void;
}

/** Supervises one server's connection. */
export class Supervisor {
  state: ServerState = ServerState.Starting;
  /** Why the last connection ended or the last attempt failed. */
  lastError: string | undefined;
  /** Connections made after the first. */
  restarts = 0;
  /** The OAuth client of a remote server with `oauth`: one for every connection, so a token outlives a reconnection. */
  readonly auth: ClientCredentialsClient | undefined;
  private upstream: Upstream | undefined;
  private generation = 0;
  private backoffMs: number;
  private readyAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private firstAttempt: Promise<void> | undefined;

  constructor(
    private readonly server: ServerConfig,
    private readonly timing: SupervisorTiming,
    private readonly hooks: SupervisorHooks,
    private readonly logger: Logger,
  ) {
    this.backoffMs = timing.firstBackoffMs;
    if (server.kind === 'http' && server.oauth !== undefined)
      this.auth = new ClientCredentialsClient(server.url, server.oauth);
  }

  /** Starts connecting; resolves once the first attempt succeeded or failed. */
  start(): Promise<void> {
    this.firstAttempt ??= this.attempt();
    return this.firstAttempt;
  }

  /** The live connection, when ready. */
  get connection(): Upstream | undefined {
    return this.state === ServerState.Ready ? this.upstream : undefined;
  }

  /** Stops: no more restarts, the connection closed (a stdio process ended). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.generation++;
    if (this.timer !== undefined) clearTimeout(this.timer);
    const upstream = this.upstream;
    this.upstream = undefined;
    await upstream?.close();
  }

  private async attempt(): Promise<void> {
    this.timer = undefined;
    if (this.stopped) return;
    const generation = ++this.generation;
    let upstream: Upstream | undefined;
    try {
      upstream = await Upstream.connect(
        this.server,
        {
          onClose: (reason) => this.closed(generation, reason),
          onToolsChanged: () => {
            if (generation === this.generation && upstream !== undefined) this.hooks.onToolsChanged(upstream);
          },
        },
        this.logger,
        this.timing.initializeTimeoutMs,
        this.auth === undefined ? {} : { auth: this.auth },
      );
      if (this.stopped) {
        await upstream.close();
        return;
      }
      this.upstream = upstream;
      await this.hooks.onConnected(upstream);
      this.readyAt = Date.now();
      this.setState(ServerState.Ready);
      upstream.startPinging(this.timing.pingIntervalMs);
      this.logger.info(`mcp.${this.server.name} ready: ${upstream.identity.name} ${upstream.identity.version}`);
    } catch (err) {
      if (this.stopped) return;
      this.generation++;
      this.upstream = undefined;
      await upstream?.close();
      this.lastError = (err as Error).message;
      this.logger.error(`mcp.${this.server.name} failed to start: ${this.lastError}`);
      this.setState(ServerState.Failed);
      this.schedule();
    }
  }

  private closed(generation: number, reason: string): void {
    if (generation !== this.generation || this.stopped) return;
    this.generation++;
    this.upstream = undefined;
    this.lastError = reason;
    if (this.readyAt !== 0 && Date.now() - this.readyAt >= STABLE_MS) this.backoffMs = this.timing.firstBackoffMs;
    this.logger.error(`mcp.${this.server.name} closed: ${reason}; restarting in ${this.backoffMs} ms`);
    this.setState(ServerState.Restarting);
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped || this.timer !== undefined) return;
    const wait = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, this.timing.maxBackoffMs);
    this.timer = setTimeout(() => {
      this.restarts++;
      void this.attempt();
    }, wait);
    this.timer.unref();
  }

  private setState(state: ServerState): void {
    if (this.state === state) return;
    this.state = state;
    this.hooks.onState(state);
  }
}
