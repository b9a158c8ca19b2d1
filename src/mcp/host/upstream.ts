/**
 * One connection to one MCP server through the SDK's client: a spawned stdio process or a
 * Streamable HTTP endpoint. It lists tools, calls them, and says when it closed; it refuses every
 * request the server makes of it (sampling, elicitation, roots) with an MCP error, and treats a
 * line on a stdio server's stdout that is not JSON-RPC as a reason to close, not to trust it.
 */

import type { Readable } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  type CallToolResult,
  McpError,
  ErrorCode as McpErrorCode,
  type Progress as McpProgress,
  type Tool,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '../../bus/log.js';
import type { ServerConfig, StdioServer } from './config.js';
import { authFailureMessage, type ClientCredentialsClient, isAuthFailure } from './oauth-client.js';
import { StderrLog } from './stderr-log.js';

/** The host's own variables a stdio server gets, besides its `env` (PROTOCOL 12). */
const PASSED_VARIABLES = ['PATH', 'HOME', 'LANG', 'TMPDIR'] as const;

/** What the host hears from a connection. */
export interface UpstreamEvents {
  /** The connection closed (the process exited, garbage on stdout, `close()`); once. */
  onClose(reason: string): void;
  /** The server sent `notifications/tools/list_changed`. */
  onToolsChanged(): void;
}

/** How one call goes upstream. */
export interface UpstreamCall {
  /** Stops the call: the SDK sends `notifications/cancelled`. */
  signal?: AbortSignal;
  /** Longest wait for the result, in ms. */
  timeoutMs: number;
  /** Each `notifications/progress` of the call; when absent no progress token is sent. */
  onProgress?: (progress: McpProgress) => void;
}

/** What `initialize` told of the server. */
export interface ServerIdentity {
  name: string;
  version: string;
  title?: string;
  instructions?: string;
}

/** How a connection is made besides the server's entry. */
export interface ConnectOptions {
  /** The OAuth client of a remote server with `oauth` (one for the host's life, so its token outlives a reconnection). */
  auth?: ClientCredentialsClient;
}

/** Longest a liveness `ping` of a remote server may take, in ms. */
const PING_TIMEOUT_MS = 10_000;

/** A live connection to a server; made by `Upstream.connect`. */
export class Upstream {
  private closed = false;
  private pinger: NodeJS.Timeout | undefined;
  private probing: Promise<void> | undefined;

  private constructor(
    private readonly client: Client,
    readonly identity: ServerIdentity,
    private readonly remote: boolean,
    /** Closes the connection with a reason the host's `onClose` hears. */
    private readonly drop: (why: string) => void,
  ) {}

  /**
   * Spawns or reaches `server` and runs `initialize` within `initializeTimeoutMs`; a server
   * that does not finish in time is closed (a stdio process killed) and this rejects.
   */
  static async connect(
    server: ServerConfig,
    events: UpstreamEvents,
    logger: Logger,
    initializeTimeoutMs: number,
    options: ConnectOptions = {},
  ): Promise<Upstream> {
    const client = new Client({ name: 'matrix-tool-registry-host', version: '1.3.0' }, { capabilities: {} });
    // No sampling, elicitation or roots here: the server's request gets an error that says so.
    client.fallbackRequestHandler = async (request) => {
      throw new McpError(
        McpErrorCode.MethodNotFound,
        `${request.method} is not offered: this client puts the server on a NATS bus, which offers no sampling, elicitation or roots`,
      );
    };
    let closedOnce = false;
    let reason = 'the connection closed';
    let upstream: Upstream | undefined;
    const drop = (why: string) => {
      reason = why;
      void transport.close().catch(() => undefined);
    };
    const transport = transportOf(server, logger, drop, options.auth, () => upstream?.probe());
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => events.onToolsChanged());
    // No close handler until `initialize` succeeded: a failed attempt is the caller's rejection, not a close.
    try {
      await client.connect(transport, { timeout: initializeTimeoutMs });
    } catch (err) {
      await transport.close().catch(() => undefined);
      const auth = options.auth;
      if (auth === undefined) throw new Error(`initialize failed: ${(err as Error).message}`, { cause: err });
      const message = isAuthFailure(err) ? authFailureMessage(err, auth) : (err as Error).message;
      if (isAuthFailure(err)) auth.noteFailure(message);
      throw new Error(`initialize failed: ${auth.redact(message)}`);
    }
    const info = client.getServerVersion();
    const identity: ServerIdentity = { name: info?.name ?? server.name, version: info?.version ?? '' };
    if (info?.title !== undefined) identity.title = info.title;
    const instructions = client.getInstructions();
    if (instructions !== undefined) identity.instructions = instructions;
    const live = new Upstream(client, identity, server.kind === 'http', drop);
    upstream = live;
    client.onclose = () => {
      if (closedOnce) return;
      closedOnce = true;
      live.closed = true;
      live.stopPinging();
      events.onClose(reason);
    };
    return live;
  }

  /**
   * Pings a remote server each `intervalMs` (one ping at a time): one that cannot be reached, or
   * does not answer within 10 s, is closed, so the host restarts it rather than saying `ready`
   * for a server that is gone. A stdio server needs none: its exit says it.
   */
  startPinging(intervalMs: number): void {
    if (!this.remote || this.closed || this.pinger !== undefined || intervalMs <= 0) return;
    this.pinger = setInterval(() => void this.probe(), intervalMs);
    this.pinger.unref();
  }

  /** One liveness ping now (one at a time); a remote server that is gone is closed. */
  probe(): Promise<void> {
    if (!this.remote || this.closed) return Promise.resolve();
    this.probing ??= this.client
      .ping({ timeout: PING_TIMEOUT_MS })
      .then(
        () => undefined,
        (err: unknown) => {
          if (isGone(err) || (err instanceof McpError && err.code === McpErrorCode.RequestTimeout))
            this.drop(`the server does not answer a ping: ${(err as Error).message}`);
        },
      )
      .finally(() => {
        this.probing = undefined;
      });
    return this.probing;
  }

  private stopPinging(): void {
    if (this.pinger !== undefined) clearInterval(this.pinger);
    this.pinger = undefined;
  }

  /**
   * A remote request that failed because the server is gone (the network, a gateway's 5xx, a
   * lost session) or refuses the host's credentials closes the connection: the calls in flight
   * are answered `unavailable` at once and the supervisor reconnects with backoff.
   */
  private async guard<T>(request: Promise<T>, signal?: AbortSignal): Promise<T> {
    try {
      return await request;
    } catch (err) {
      if (this.remote && !this.closed && signal?.aborted !== true && isGone(err))
        this.drop(`a request to the server failed: ${(err as Error).message}`);
      throw err;
    }
  }

  /** Whether the connection is gone. */
  get isClosed(): boolean {
    return this.closed;
  }

  /** Every tool the server lists, following its cursors. */
  async listTools(timeoutMs: number): Promise<Tool[]> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.guard(
        this.client.listTools(cursor === undefined ? {} : { cursor }, { timeout: timeoutMs }),
      );
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return tools;
  }

  /** `tools/call`; rejects with the SDK's `McpError` (a JSON-RPC error, a timeout, a closed connection). */
  async call(name: string, args: Record<string, unknown>, options: UpstreamCall): Promise<CallToolResult> {
    const result = await this.guard(
      this.client.callTool({ name, arguments: args }, undefined, {
        signal: options.signal,
        timeout: options.timeoutMs,
        ...(options.onProgress !== undefined && { onprogress: options.onProgress }),
      }),
      options.signal,
    );
    return result as CallToolResult;
  }

  /** Closes the connection (kills a stdio process that does not end on its own). */
  async close(): Promise<void> {
    this.closed = true;
    this.stopPinging();
    await this.client.close().catch(() => undefined);
  }
}

/**
 * Whether a failed request means the remote server is gone or refuses the host: not a JSON-RPC
 * error (`McpError`, the server's own answer) nor the caller's cancel, but the network, a
 * gateway's 502/503/504, a 404 of a lost session, or a refused credential.
 */
function isGone(err: unknown): boolean {
  if (err instanceof McpError) return false;
  if (err instanceof StreamableHTTPError) return [401, 403, 404, 502, 503, 504].includes(err.code ?? 0);
  if (isAuthFailure(err)) return true;
  if (err instanceof TypeError) return true; // fetch's "fetch failed": refused, reset, unresolved
  return err instanceof Error && NETWORK_FAILURE.test(`${err.message} ${String((err.cause as Error)?.message ?? '')}`);
}

/** What Node's fetch and sockets say when a peer is gone. */
const NETWORK_FAILURE =
  /ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|socket|terminated|other side closed/i;

function transportOf(
  server: ServerConfig,
  logger: Logger,
  garbage: (why: string) => void,
  auth: ClientCredentialsClient | undefined,
  streamBroke: () => void,
): Transport {
  if (server.kind === 'http') {
    const transport = new StreamableHTTPClientTransport(server.url, {
      requestInit: { headers: server.headers },
      ...(auth !== undefined && { authProvider: auth, fetch: auth.fetchFor() }),
    });
    // A response stream cut off (the server went away mid-call): find out at once whether it is gone.
    transport.onerror = (err) => {
      if (/SSE stream disconnected|Failed to reconnect|Maximum reconnection/.test(err.message)) streamBroke();
    };
    return transport;
  }
  const transport = new StdioClientTransport({
    command: server.command,
    args: server.args,
    env: childEnvironment(server),
    ...(server.cwd !== undefined && { cwd: server.cwd }),
    stderr: 'pipe',
  });
  new StderrLog(server.name, logger).follow(transport.stderr as Readable | null);
  // A line on stdout that is not JSON-RPC: the server is not speaking MCP; it is restarted.
  transport.onerror = (err) => {
    if (err instanceof SyntaxError || err.name === 'ZodError' || /ReadBuffer exceeded/.test(err.message)) {
      logger.error(`mcp.${server.name}: stdout is not JSON-RPC; restarting the server`, { error: err.message });
      garbage(`it wrote something on stdout that is not JSON-RPC (${err.message.slice(0, 200)})`);
    }
  };
  return transport;
}

/** PATH, HOME, LANG and TMPDIR of the host, then the server's own variables. */
function childEnvironment(server: StdioServer): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of PASSED_VARIABLES) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return { ...env, ...server.env };
}
