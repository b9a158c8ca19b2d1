/**
 * One connection to one MCP server through the SDK's client: a spawned stdio process or a
 * Streamable HTTP endpoint. It lists tools, calls them, and says when it closed; it refuses every
 * request the server makes of it (sampling, elicitation, roots) with an MCP error, and treats a
 * line on a stdio server's stdout that is not JSON-RPC as a reason to close, not to trust it.
 */

import type { Readable } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
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

/** A live connection to a server; made by `Upstream.connect`. */
export class Upstream {
  private closed = false;

  private constructor(
    private readonly client: Client,
    readonly identity: ServerIdentity,
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
    const transport = transportOf(server, logger, options.auth, (why) => {
      reason = why;
      void transport.close().catch(() => undefined);
    });
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
    const upstream = new Upstream(client, identity);
    client.onclose = () => {
      if (closedOnce) return;
      closedOnce = true;
      upstream.closed = true;
      events.onClose(reason);
    };
    return upstream;
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
      const page = await this.client.listTools(cursor === undefined ? {} : { cursor }, { timeout: timeoutMs });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return tools;
  }

  /** `tools/call`; rejects with the SDK's `McpError` (a JSON-RPC error, a timeout, a closed connection). */
  async call(name: string, args: Record<string, unknown>, options: UpstreamCall): Promise<CallToolResult> {
    const result = await this.client.callTool({ name, arguments: args }, undefined, {
      signal: options.signal,
      timeout: options.timeoutMs,
      ...(options.onProgress !== undefined && { onprogress: options.onProgress }),
    });
    return result as CallToolResult;
  }

  /** Closes the connection (kills a stdio process that does not end on its own). */
  async close(): Promise<void> {
    this.closed = true;
    await this.client.close().catch(() => undefined);
  }
}

function transportOf(
  server: ServerConfig,
  logger: Logger,
  auth: ClientCredentialsClient | undefined,
  garbage: (why: string) => void,
): Transport {
  if (server.kind === 'http')
    return new StreamableHTTPClientTransport(server.url, {
      requestInit: { headers: server.headers },
      ...(auth !== undefined && { authProvider: auth }),
    });
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
