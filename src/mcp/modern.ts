/**
 * MCP 2026-07-28 over HTTP, stateless (PROTOCOL 15): the SDK 2.x `createMcpHandler` frames and
 * validates every request (`_meta` envelope, `MCP-Protocol-Version`, `Mcp-Method` / `Mcp-Name`,
 * `server/discover`, removed methods) and builds a fresh `Server` for each; that server holds
 * nothing between requests. Tools resolve from the registry on each request and tasks live in
 * `system.tasks`, so any number of bridge processes serve any request.
 */
import { randomBytes } from 'node:crypto';
import {
  type AuthInfo,
  createMcpHandler,
  type JSONRPCRequest,
  type McpHttpHandler,
  type McpRequestContext,
  ProtocolError,
  ProtocolErrorCode,
  type Result,
  Server,
  type ServerContext,
  type ServerEventBus,
  type StandardSchemaV1,
} from '@modelcontextprotocol/server';
import type { BusClient } from '../bus/client.js';
import type { CallContext } from '../bus/context.js';
import { MatrixError } from '../bus/errors.js';
import { Mounts } from '../bus/subjects.js';
import type { ToolResult } from '../dispatcher/types.js';
import type { McpTool } from '../registry/provider-tools.js';
import { mcpListedTools } from '../registry/search/mcp-view.js';
import type { DeferOptions } from '../registry/search/search-tool.js';
import { REGISTRY_VERSION } from '../registry/system-tools.js';
import type { ResolvedToolContext, ResolveRequest } from '../registry/types.js';
import type { Task } from '../tasks/types.js';
import { toolCallParams } from './bridge.js';
import { answerBridgeSearch, callsBridgeSearch } from './bridge-search.js';
import {
  type BridgeCalls,
  callToolResultOf,
  dispatcherFailed,
  type HandlerExtra,
  plainCall,
  withOutputSchemas,
} from './bridge-tasks.js';
import {
  cancelTask,
  declaresTasks,
  getTask,
  modernTaskOf,
  TASKS_EXTENSION,
  type TaskCaller,
  taskIdOf,
  tasksRequired,
  updateTask,
} from './modern-tasks.js';

/** Who one request is served as: the session its tools resolve for and the context it is called with. */
export interface ModernCaller {
  session: ResolveRequest;
  ctx: CallContext;
}

/**
 * How long a 2026 client may keep a `tools/list` result, in ms: the list is the registry's at the
 * revision named in its `_meta`, and a registry change may come at any time, so the hint is short.
 */
export const TOOLS_LIST_TTL_MS = 10_000;
/** The `_meta` keys of `tools/list` that name the registry state the list was read at. */
export const REVISION_META = 'dev.matrix-tools/registryRevision';
export const DIGEST_META = 'dev.matrix-tools/toolsDigest';
/** Longest wait for one plain call: an approver may take up to a minute, then the tool its timeout. */
const CALL_TIMEOUT_MS = 95_000;

/** Carries the caller from the HTTP layer to the per-request server (the SDK's pass-through `authInfo`). */
export function callerAuthInfo(caller: ModernCaller): AuthInfo {
  return { token: caller.ctx.grant ?? '', clientId: caller.ctx.principal ?? '', scopes: [], extra: { caller } };
}

/**
 * The 2026-07-28 leg: `fetch` serves one request; 2025-era requests are the caller's to route
 * elsewhere. Past `search`'s threshold a client lists the kept tools and `search_tools`.
 * `subscriptions/listen` streams read their change events from `bus` (src/mcp/modern-changes.ts).
 */
export function modernHandler(client: BusClient, search: DeferOptions = {}, bus?: ServerEventBus): McpHttpHandler {
  return createMcpHandler((ctx) => modernServer(client, callerOf(ctx), search), {
    legacy: 'reject',
    ...(bus === undefined ? {} : { bus }),
    onerror: (err) => process.stderr.write(`mcp bridge: 2026-07-28 request: ${err.message}\n`),
  });
}

/** `caller`'s tools as the registry resolves them now (`system.tools.$resolve`, MCP format). */
export function resolveTools(client: BusClient, caller: ModernCaller): Promise<ResolvedToolContext> {
  return client.request<ResolvedToolContext>(
    Mounts.Tools,
    '$resolve',
    { ...caller.session, format: 'mcp' },
    caller.ctx,
  );
}

/**
 * The SDK's `Server` with one difference: a `tools/call` that became a task answers the
 * extension's `CreateTaskResult` as it is. The SDK gives any `tools/call` result without `content`
 * a `content: []` before checking it as a `CallToolResult` (it knows 2025's `{task}` and 2026's
 * `input_required`, not the extension's flat task), which would put a field on the task result
 * that its shape does not have. Everything else, the request's checks among them, is the SDK's.
 */
class ModernServer extends Server {
  protected override _wrapHandler(
    method: string,
    handler: (request: JSONRPCRequest, ctx: ServerContext) => Promise<Result>,
  ): (request: JSONRPCRequest, ctx: ServerContext) => Promise<Result> {
    if (method !== 'tools/call') return super._wrapHandler(method, handler);
    const checked = (request: JSONRPCRequest, ctx: ServerContext, task: { made?: Result }) =>
      super._wrapHandler(method, async (req, c) => {
        const result = await handler(req, c);
        if (result.resultType !== 'task') return result;
        task.made = result;
        return { content: [] };
      })(request, ctx);
    return async (request, ctx) => {
      const task: { made?: Result } = {};
      const result = await checked(request, ctx, task);
      return task.made ?? result;
    };
  }
}

function callerOf(ctx: McpRequestContext): ModernCaller {
  const caller = ctx.authInfo?.extra?.caller as ModernCaller | undefined;
  if (caller === undefined) throw new Error('a 2026-07-28 request reached the bridge without a caller');
  return caller;
}

/**
 * A 2026-07-28 server for `caller`: its tools, calls and task ops, all onto the bus. Over HTTP one
 * serves one request; over stdio one serves the connection, holding nothing a request needs.
 * Past `search`'s threshold its `tools/list` shows the kept tools and `search_tools` (PROTOCOL 13).
 */
export function modernServer(client: BusClient, caller: ModernCaller, search: DeferOptions = {}): Server {
  const server = new ModernServer(
    { name: 'matrix-tools', version: REGISTRY_VERSION },
    { capabilities: { tools: { listChanged: true }, extensions: { [TASKS_EXTENSION]: {} } } },
  );
  const resolve = () =>
    resolveTools(client, caller).catch((err: unknown) => {
      const why = err instanceof MatrixError ? `${err.code}: ${err.message}` : String(err);
      throw new ProtocolError(ProtocolErrorCode.InternalError, `system.tools could not resolve the tools: ${why}`);
    });
  const taskCaller: TaskCaller = {
    client,
    ctx: caller.ctx,
    // Read when a task's result is shown: which tools the client is listed with an outputSchema.
    outputSchemas: () => resolve().then((r) => withOutputSchemas(toolsOf(r))),
  };

  server.setRequestHandler('tools/list', async () => {
    const resolved = await resolve();
    const tools = mcpListedTools(toolsOf(resolved), search).map(withoutExecution);
    return {
      tools,
      ttlMs: TOOLS_LIST_TTL_MS,
      cacheScope: 'private',
      _meta: { [REVISION_META]: resolved.revision, [DIGEST_META]: resolved.digest },
    } as never;
  });
  server.setRequestHandler('tools/call', async (request, ctx) => {
    const params = toolCallParams(request.params);
    const resolved = await resolve();
    const tools = toolsOf(resolved);
    if (callsBridgeSearch(params.name, tools, search))
      return (await answerBridgeSearch(
        client,
        caller.session,
        caller.ctx,
        params.arguments,
        tools,
        withoutExecution,
        `mcp-${randomBytes(9).toString('base64url')}`,
      )) as never;
    return callTool(client, caller, params, ctx, resolved);
  });
  // The extension's ops; any other method is the SDK's to refuse (404, -32601).
  for (const [method, op] of Object.entries(TASK_OPS))
    server.setRequestHandler(method, { params: taskRef(method) }, async (params, ctx) => {
      if (!declaresTasks(ctx.mcpReq as never)) throw tasksRequired(`${method} needs the ${TASKS_EXTENSION} extension`);
      return (await op(taskCaller, params.taskId)) as never;
    });
  return server;
}

function toolsOf(resolved: ResolvedToolContext): McpTool[] {
  return (resolved.providerTools ?? []) as McpTool[];
}

/** A tool as 2026-07-28 lists it: no `execution`, the server decides which calls become tasks. */
function withoutExecution(tool: McpTool): Omit<McpTool, 'execution'> {
  const { execution: _, ...rest } = tool;
  return rest;
}

/** The params of a tasks op as a Standard Schema: a `taskId`, or `-32602` saying what is wrong. */
function taskRef(method: string): StandardSchemaV1<unknown, { taskId: string }> {
  return {
    '~standard': {
      version: 1,
      vendor: 'matrix-tools',
      validate: (params) => {
        try {
          return { value: { taskId: taskIdOf(method, params) } };
        } catch (err) {
          return { issues: [{ message: (err as Error).message }] };
        }
      },
    },
  };
}

const TASK_OPS: Record<string, typeof getTask> = {
  'tasks/get': getTask,
  'tasks/cancel': cancelTask,
  'tasks/update': updateTask,
};

/**
 * A `tools/call`. The server decides when it becomes a task: when the client declared the tasks
 * extension and the tool allows tasks (`execution.taskSupport` `optional` or `required`); a tool
 * that requires a task, called by a client without the extension, is `-32021`.
 */
async function callTool(
  client: BusClient,
  caller: ModernCaller,
  params: { name: string; arguments: Record<string, unknown> },
  ctx: ServerContext,
  resolved: ResolvedToolContext,
): Promise<never> {
  const tool = (resolved.providerTools ?? []).find((t) => (t as { name?: string }).name === params.name) as
    | { execution?: { taskSupport?: string } }
    | undefined;
  const support = tool?.execution?.taskSupport ?? 'forbidden';
  const tasks = declaresTasks(ctx.mcpReq as never);
  if (support === 'required' && !tasks) throw tasksRequired(`"${params.name}" runs only as a task`);
  const call = { id: `mcp-${randomBytes(9).toString('base64url')}`, name: params.name, arguments: params.arguments };
  if (!tasks || support === 'forbidden') {
    const schemas = withOutputSchemas(toolsOf(resolved));
    const calls: BridgeCalls = {
      client,
      ctx: caller.ctx,
      session: caller.session,
      callTimeoutMs: CALL_TIMEOUT_MS,
      notify: (n) => ctx.mcpReq.notify(n as never),
      outputSchema: (name) => schemas.has(name),
    };
    const extra: HandlerExtra = {
      signal: ctx.mcpReq.signal,
      _meta: { progressToken: (ctx.mcpReq._meta as { progressToken?: string | number } | undefined)?.progressToken },
      sendNotification: (n) => ctx.mcpReq.notify(n as never),
    };
    return (await plainCall(calls, call, extra)) as never;
  }
  let reply: ToolResult | { task: Task };
  try {
    reply = await client.request<ToolResult | { task: Task }>(
      Mounts.Dispatcher,
      '$call',
      { session: caller.session, call, task: {} },
      caller.ctx,
    );
  } catch (err) {
    return dispatcherFailed(call.name, err) as never;
  }
  if (!('task' in reply)) return callToolResultOf(reply, withOutputSchemas(toolsOf(resolved)).has(call.name)) as never;
  return { resultType: 'task', ...modernTaskOf(reply.task) } as never;
}
