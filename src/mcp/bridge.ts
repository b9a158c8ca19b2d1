/**
 * `mcp --profile P`: the tools of a resolved context, served over MCP on stdio, so Claude,
 * Cursor or any MCP client can use the bus tools. `initialize` carries the context's
 * instructions, `tools/list` comes from `$resolve` (MCP format), `tools/call` goes through
 * `system.dispatcher.$call`, and `notifications/tools/list_changed` goes out when the profile's
 * resolved digest changes. With a grant, every request carries it in `Matrix-Grant`. The bridge
 * ends when stdin ends, the client goes away, or on SIGINT/SIGTERM. Stdout is the MCP channel:
 * logs go to stderr.
 */

import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  type CallToolResult,
  ErrorCode as JsonRpcError,
  ListToolsRequestSchema,
  type Task as McpTask,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient, type RequestOptions } from '../bus/client.js';
import type { CallContext } from '../bus/context.js';
import { MatrixError } from '../bus/errors.js';
import { Mounts } from '../bus/subjects.js';
import { recheckOnChange } from '../registry/events.js';
import type { McpTool } from '../registry/provider-tools.js';
import { MCP_SEARCH_TOOL_NAME, mcpListedTools } from '../registry/search/mcp-view.js';
import type { DeferOptions } from '../registry/search/search-tool.js';
import { REGISTRY_VERSION } from '../registry/system-tools.js';
import type { ResolvedToolContext, ResolveRequest } from '../registry/types.js';
import { answerBridgeSearch, callsBridgeSearch } from './bridge-search.js';
import {
  type BridgeCalls,
  type HandlerExtra,
  plainCall,
  TASKS_CAPABILITY,
  taskCall,
  taskOps,
  withOutputSchemas,
} from './bridge-tasks.js';
import { wellFormedLines } from './input.js';
import { firstLineIsModern, serveModernStdio } from './modern-stdio.js';

/** How long a closing bridge waits for requests it already took, in ms. */
const CLOSE_GRACE_MS = 3_000;
/** Longest wait for one tool call: an approver may take up to a minute, then the tool its timeout. */
const CALL_TIMEOUT_MS = 95_000;

/** A JSON-RPC error with its own code and a message meant for people (the SDK's McpError prefixes its code). */
export class JsonRpcFailure extends Error {
  override name = 'JsonRpcFailure';
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** The checked params of a `tools/call`. */
export interface ToolCallParams {
  name: string;
  arguments: Record<string, unknown>;
}

/**
 * Reads the params of a `tools/call`, or throws `-32602 Invalid params` saying in one sentence
 * what is wrong. Absent `arguments` are `{}`; present ones must be an object, as MCP says.
 */
export function toolCallParams(params: unknown): ToolCallParams {
  if (!isObject(params))
    throw invalidParams(`tools/call params must be an object {name, arguments?}, got ${kindOf(params)}`);
  const { name, arguments: args } = params;
  if (typeof name !== 'string' || name === '')
    throw invalidParams(`tools/call params.name must name a tool (a non-empty string), got ${kindOf(name)}`);
  if (args === undefined) return { name, arguments: {} };
  if (!isObject(args))
    throw invalidParams(
      `tools/call params.arguments of "${name}" must be an object (or left out), got ${kindOf(args)}`,
    );
  return { name, arguments: args };
}

function invalidParams(message: string): JsonRpcFailure {
  return new JsonRpcFailure(JsonRpcError.InvalidParams, message);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string')
    return `a string (${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)})`;
  return value === undefined ? 'nothing' : `a ${typeof value}`;
}

/**
 * Serves `session`'s tools over MCP stdio until stdin ends, the client goes away or a signal
 * comes: 2026-07-28 when the client's first message says so, else 2025-11-25. Past `search`'s
 * threshold (default 30 tools) the client lists the kept tools and `search_tools`.
 */
export async function serveMcp(
  nc: NatsConnection,
  session: ResolveRequest,
  ctx: CallContext = {},
  search: DeferOptions = {},
): Promise<void> {
  const bridge = await openBridge(nc, session, ctx, search);
  log(`ready: profile ${session.profile}, ${bridge.callPrefix}`);
  if (await firstLineIsModern(process.stdin)) {
    await bridge.close();
    return serveModernStdio(nc, session, ctx, search);
  }
  await bridge.run();
}

/**
 * A bridge for `session`, its tools resolved once (`initialize` carries their instructions); a
 * `MatrixError` when they cannot be. `search` says when its client gets `search_tools` instead
 * of every tool.
 */
export async function openBridge(
  nc: NatsConnection,
  session: ResolveRequest,
  ctx: CallContext,
  search: DeferOptions = {},
): Promise<McpBridge> {
  const request: ResolveRequest = { ...session, format: 'mcp' };
  const client = new GrantWatchingClient(nc, { timeoutMs: 10_000 });
  // Resolved before the client is answered: `initialize` carries the instructions, and a
  // profile that cannot be resolved ends the bridge with the CLI's exit code, said on stderr.
  const first = await client
    .request<ResolvedToolContext>(Mounts.Tools, '$resolve', request, ctx)
    .catch((err: unknown) => {
      client.close();
      throw err;
    });
  return new McpBridge(nc, client, session, first, ctx, search);
}

/**
 * A bus client that keeps the first refusal of the session's grant by the service (revoked,
 * expired, another holder's).
 */
class GrantWatchingClient extends BusClient {
  refusal: MatrixError | undefined;

  override request<T = unknown>(target: string, op: string, args: unknown, options?: RequestOptions): Promise<T> {
    return super.request<T>(target, op, args, options).catch((err: unknown) => {
      if (err instanceof MatrixError && err.code === 'forbidden' && err.details?.grant !== undefined)
        this.refusal ??= err;
      throw err;
    });
  }
}

/**
 * One bridge session: an MCP server on stdio in front of `system.dispatcher`. Calls go through
 * the dispatcher mount, not a dispatcher in this process: the bridge runs as an agent, which may
 * call `system.dispatcher` but neither reach a target nor publish audit events itself.
 */
export class McpBridge {
  private readonly server: Server;
  /** The `$resolve` request of `tools/list` (MCP format). */
  private readonly listRequest: ResolveRequest;
  /** Audit `callId`s are `<prefix>-<JSON-RPC id>`: JSON-RPC ids repeat across sessions, this prefix does not. */
  readonly callPrefix = `mcp-${randomBytes(6).toString('hex')}`;
  /** The digest of the tools the client was last given or told about; undefined when unknown. */
  private digest: string | undefined;
  private readonly pending = new Set<Promise<unknown>>();
  /** The tools last resolved with an `outputSchema`: their results carry their own `structuredContent`. */
  private outputSchemas: Set<string>;
  private stopWatching: (() => void) | undefined;
  private closing: Promise<void> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly client: GrantWatchingClient,
    private readonly session: ResolveRequest,
    first: ResolvedToolContext,
    /** The caller's context on every request: its grant (`Matrix-Grant`) when it has one. */
    private readonly ctx: CallContext,
    /** Past its threshold the client lists the kept tools and `search_tools` (PROTOCOL 13). */
    private readonly search: DeferOptions = {},
  ) {
    this.listRequest = { ...session, format: 'mcp' };
    this.digest = first.digest;
    this.outputSchemas = withOutputSchemas(toolsOf(first));
    const instructions = first.instructions.trim();
    this.server = new Server(
      { name: 'matrix-tools', version: REGISTRY_VERSION },
      {
        capabilities: { tools: { listChanged: true }, tasks: TASKS_CAPABILITY },
        ...(instructions ? { instructions } : {}),
      },
    );
    this.server.setRequestHandler(ListToolsRequestSchema, () => this.track(this.listTools()));
    // The SDK parses tools/call params with zod before any handler of its own sees them, and
    // answers a mismatch with -32603 and the zod dump; unhandled methods reach this instead.
    // The same for the task ops: their params are checked in taskOps.
    const tasks = taskOps(this.calls(), (work) => this.track(work));
    this.server.fallbackRequestHandler = async (req, extra) => {
      const taskOp = tasks.get(req.method);
      if (taskOp !== undefined) return (await taskOp(req.params, extra)) as Record<string, unknown>;
      if (req.method !== 'tools/call')
        throw new JsonRpcFailure(JsonRpcError.MethodNotFound, `Method not found: ${req.method}`);
      return this.track(this.callTool(toolCallParams(req.params), String(extra.requestId), req.params, extra));
    };
  }

  /** What the calls and task ops of this session are sent with. */
  private calls(): BridgeCalls {
    return {
      client: this.client,
      ctx: this.ctx,
      session: this.session,
      callTimeoutMs: CALL_TIMEOUT_MS,
      notify: (notification) => this.server.notification(notification),
      outputSchema: (name) => this.outputSchemas.has(name),
    };
  }

  /**
   * Serves until the client is gone, then closes: requests in flight get up to a second, the
   * dispatcher flushes its audit events.
   */
  async run(): Promise<void> {
    const input = process.stdin.pipe(
      wellFormedLines((response) => process.stdout.write(`${JSON.stringify(response)}\n`)),
    );
    const ended = this.ended(input);
    await this.connect(new StdioServerTransport(input));
    const reason = await ended;
    log(`${reason}; closing`);
    await this.close();
  }

  /** Serves over `transport` (stdio, or one MCP session of the HTTP bridge) and watches the registry. */
  async connect(transport: Transport): Promise<void> {
    this.stopWatching = recheckOnChange(this.nc, () => this.compareDigest());
    await this.server.connect(transport);
  }

  /**
   * Sends its later requests with `grant`: the session's grant, signed again for the same
   * principal, session and authority.
   */
  renewGrant(grant: string): void {
    this.ctx.grant = grant;
    this.client.refusal = undefined;
  }

  /** The service's refusal of the session's grant, once one of its requests met it (and no renewal came since). */
  get grantRefusal(): MatrixError | undefined {
    return this.client.refusal;
  }

  /** Stops watching, gives requests in flight up to a second, closes the server and the client; once. */
  close(): Promise<void> {
    this.closing ??= this.closeOnce();
    return this.closing;
  }

  private async closeOnce(): Promise<void> {
    this.stopWatching?.();
    // The last lines reach their handlers a few promise turns after the input ends: let them.
    await new Promise((resolve) => setImmediate(resolve));
    await Promise.race([
      Promise.allSettled([...this.pending]),
      new Promise((resolve) => setTimeout(resolve, CLOSE_GRACE_MS).unref()),
    ]);
    await this.server.close().catch(() => {});
    this.client.close();
  }

  /**
   * Resolves with why the session ended. The SDK's stdio transport fires no close when stdin
   * ends, so a bridge whose client exited would live on, holding its NATS connection. The
   * input ends after stdin does, once every line in it has been handed on.
   */
  private ended(input: Readable): Promise<string> {
    return new Promise<string>((resolve) => {
      input.once('end', () => resolve('stdin ended'));
      process.stdin.once('error', (err) => resolve(`stdin failed (${err.message})`));
      process.stdout.on('error', (err) => resolve(`client gone (${err.message})`));
      process.once('SIGINT', () => resolve('SIGINT'));
      process.once('SIGTERM', () => resolve('SIGTERM'));
      this.server.onclose = () => resolve('transport closed');
    });
  }

  private track<T>(work: Promise<T>): Promise<T> {
    this.pending.add(work);
    const done = () => this.pending.delete(work);
    work.then(done, done);
    return work;
  }

  private async resolve(): Promise<ResolvedToolContext> {
    const resolved = await this.client.request<ResolvedToolContext>(
      Mounts.Tools,
      '$resolve',
      this.listRequest,
      this.ctx,
    );
    this.outputSchemas = withOutputSchemas(toolsOf(resolved));
    return resolved;
  }

  private async listTools(): Promise<{ tools: Tool[] }> {
    const resolved = await this.resolve();
    this.digest = resolved.digest;
    return { tools: mcpListedTools(toolsOf(resolved), this.search) as Tool[] };
  }

  /**
   * A `tools/call`: the bridge's own `search_tools` past the threshold; else a task when it asks
   * for one (`params.task`), else a plain call, both through `system.dispatcher`.
   */
  private async callTool(
    params: ToolCallParams,
    requestId: string,
    raw: unknown,
    extra: HandlerExtra,
  ): Promise<CallToolResult | { task: McpTask }> {
    const task = (raw as { task?: { ttl?: unknown } }).task;
    const asTask = task !== null && typeof task === 'object';
    if (params.name === MCP_SEARCH_TOOL_NAME) {
      const tools = toolsOf(await this.resolve());
      if (callsBridgeSearch(params.name, tools, this.search)) {
        if (asTask)
          throw new JsonRpcFailure(
            JsonRpcError.MethodNotFound,
            `"${params.name}" does not run as a task (taskSupport forbidden)`,
          );
        return answerBridgeSearch(
          this.client,
          this.session,
          this.ctx,
          params.arguments,
          tools,
          undefined,
          `${this.callPrefix}-${requestId}`,
        );
      }
    }
    const call = { id: `${this.callPrefix}-${requestId}`, name: params.name, arguments: params.arguments };
    if (asTask) return taskCall(this.calls(), call, typeof task.ttl === 'number' ? task.ttl : undefined, extra);
    return plainCall(this.calls(), call, extra);
  }

  /** After a registry change: resolves again and tells the client only when this profile's tools changed. */
  private async compareDigest(): Promise<void> {
    let resolved: ResolvedToolContext;
    try {
      resolved = await this.resolve();
    } catch (err) {
      // Unknown now: the next check that succeeds tells the client, whatever it finds.
      this.digest = undefined;
      log(`registry changed, but resolving again failed: ${(err as Error).message}`);
      return;
    }
    if (resolved.digest === this.digest) {
      log(`registry revision ${resolved.revision}: tools unchanged`);
      return;
    }
    this.digest = resolved.digest;
    await this.server.sendToolListChanged().catch(() => {});
    log(
      `registry revision ${resolved.revision}: tools changed (digest ${resolved.digest.slice(0, 12)}), list_changed sent`,
    );
  }
}

function toolsOf(resolved: ResolvedToolContext): McpTool[] {
  return (resolved.providerTools ?? []) as McpTool[];
}

function log(line: string): void {
  process.stderr.write(`mcp bridge: ${line}\n`);
}
