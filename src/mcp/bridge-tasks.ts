/**
 * The MCP bridge's side of tasks, progress and cancellation (PROTOCOL 11): a `tools/call` with
 * `task` becomes a `$call` with `task`; `tasks/get|result|cancel|list` map onto `system.tasks`;
 * `notifications/progress` go out for calls that carry a `progressToken` (plain calls from the
 * dispatcher's relayed reports, tasks from the progress recorded on them); a
 * `notifications/cancelled` cancels a plain call (`system.dispatcher.$cancel {callId}`).
 */
import {
  type CallToolResult,
  ErrorCode as JsonRpcError,
  type Task as McpTask,
  type ServerNotification,
} from '@modelcontextprotocol/sdk/types.js';
import type { BusClient } from '../bus/client.js';
import type { CallContext, Progress } from '../bus/context.js';
import { MatrixError, NotFoundError } from '../bus/errors.js';
import { CANCEL_OP, Mounts } from '../bus/subjects.js';
import { failure } from '../dispatcher/results.js';
import { structuredObject } from '../dispatcher/shape.js';
import type { ToolResult } from '../dispatcher/types.js';
import type { ResolveRequest } from '../registry/types.js';
import { isTerminal, type Task, type TaskListReply } from '../tasks/types.js';
import { JsonRpcFailure } from './bridge.js';

/** What the bridge's calls and task ops need: the client, the caller's context and session. */
export interface BridgeCalls {
  client: BusClient;
  ctx: CallContext;
  session: ResolveRequest;
  /** Longest wait for one plain call, in ms. */
  callTimeoutMs: number;
  /**
   * Sends a notification of the session tied to no request: a task's progress outlives the
   * `tools/call` that started it (over HTTP that request's stream closed with its answer), and
   * the client matches it by its `progressToken`. Rejects once the session is gone.
   */
  notify(notification: ServerNotification): Promise<void>;
  /** Whether the client was listed the tool `name` with an `outputSchema` (default: no tool was). */
  outputSchema?: (name: string) => boolean;
}

/** What the SDK hands a request handler that the bridge uses. */
export interface HandlerExtra {
  signal: AbortSignal;
  _meta?: { progressToken?: string | number };
  sendNotification(notification: ServerNotification): Promise<void>;
}

/** The MCP `tasks` capability the bridge declares: tools/call as tasks, list and cancel. */
export const TASKS_CAPABILITY = { list: {}, cancel: {}, requests: { tools: { call: {} } } };

/** Longest `system.tasks.$result` wait of one round of `tasks/result`, in ms (its maximum). */
const RESULT_ROUND_MS = 30_000;
/** How often the bridge reads a task's progress for the `progressToken` of its `tools/call`, in ms. */
const FOLLOW_MS = 1_000;
/** The `_meta` key MCP relates a message to a task by. */
const RELATED_TASK = 'io.modelcontextprotocol/related-task';

/**
 * A `ToolResult` as MCP's `CallToolResult`. A failed tool's text leads with `Error (<code>):`:
 * some clients pass the model only the content (the AI SDK's MCP client turns it into text
 * parts and drops `isError`), so the failure must be in the words themselves.
 *
 * For a tool the client was listed with an `outputSchema` (`withOutputSchema`), which the client
 * checks `structuredContent` against: a reply that is MCP's `CallToolResult` (a hosted server's)
 * gives its own `structuredContent` and content blocks; any other object reply is the structured
 * content itself. A successful result with none to give (the server sent none, or the result
 * passed the content cap and so carries no structured reply) is a failed one saying so, never a
 * result the client's check would throw on.
 */
export function callToolResultOf(result: ToolResult, withOutputSchema = false): CallToolResult {
  if (withOutputSchema && !result.isError) {
    const upstream = mcpCallResultOf(result.structured);
    if (upstream?.structuredContent !== undefined)
      return { content: upstream.content, structuredContent: upstream.structuredContent, isError: false };
    if (upstream === undefined && structuredObject(result) !== undefined) return plainResultOf(result);
    const why = result.truncated
      ? `its result (${result.truncated.total} characters) passed the cap of ${result.truncated.shown}`
      : 'its result has none';
    const text = `Error (no_structured_content): "${result.name}" declares an outputSchema, but ${why}: ${result.content}`;
    return { content: [{ type: 'text', text }], isError: true };
  }
  return plainResultOf(result);
}

function plainResultOf(result: ToolResult): CallToolResult {
  const text = result.isError ? `Error (${result.error?.code ?? 'tool_error'}): ${result.content}` : result.content;
  const reply: CallToolResult = { content: [{ type: 'text', text }], isError: result.isError };
  const structured = structuredObject(result);
  if (structured !== undefined) reply.structuredContent = structured;
  return reply;
}

/**
 * A reply that is MCP's `CallToolResult` (what a host mount answers, PROTOCOL 12): its content
 * blocks, and its `structuredContent` when that is an object; undefined for any other reply.
 */
export function mcpCallResultOf(
  reply: unknown,
): { content: CallToolResult['content']; structuredContent?: Record<string, unknown> } | undefined {
  if (reply === null || typeof reply !== 'object' || Array.isArray(reply)) return undefined;
  const { content, structuredContent } = reply as { content?: unknown; structuredContent?: unknown };
  if (!Array.isArray(content)) return undefined;
  const blocks = content.every(
    (b) => b !== null && typeof b === 'object' && typeof (b as { type?: unknown }).type === 'string',
  );
  if (!blocks) return undefined;
  const shown: { content: CallToolResult['content']; structuredContent?: Record<string, unknown> } = {
    content: content as CallToolResult['content'],
  };
  if (structuredContent !== null && typeof structuredContent === 'object' && !Array.isArray(structuredContent))
    shown.structuredContent = structuredContent as Record<string, unknown>;
  return shown;
}

/** Names of the listed tools that carry an `outputSchema`. */
export function withOutputSchemas(tools: readonly { name: string; outputSchema?: unknown }[]): Set<string> {
  return new Set(tools.filter((t) => t.outputSchema !== undefined).map((t) => t.name));
}

/** The result of a call the dispatcher itself failed (not the tool): still one the model can read. */
export function dispatcherFailed(name: string, err: unknown): CallToolResult {
  const text =
    err instanceof MatrixError
      ? failure.dispatcherAnswered(name, err).message
      : `"${name}" could not be run: system.dispatcher answered ${String(err)}`;
  return { content: [{ type: 'text', text }], isError: true };
}

/** A task as MCP shows it. */
export function mcpTaskOf(task: Task): McpTask {
  const shown: McpTask = {
    taskId: task.taskId,
    status: task.status,
    ttl: task.ttlMs,
    createdAt: task.createdAt,
    lastUpdatedAt: task.lastUpdatedAt,
    pollInterval: task.pollIntervalMs,
  };
  if (task.statusMessage !== undefined) shown.statusMessage = task.statusMessage;
  return shown;
}

/**
 * A plain `tools/call`: sent with a `Matrix-Call-Id` of its own, so a `notifications/cancelled`
 * (the SDK aborts `extra.signal`) cancels it; with a `progressToken`, the dispatcher's relayed
 * progress reports go out as `notifications/progress`.
 */
export async function plainCall(
  calls: BridgeCalls,
  call: { id: string; name: string; arguments: Record<string, unknown> },
  extra: HandlerExtra,
): Promise<CallToolResult> {
  const { client, ctx } = calls;
  const token = extra._meta?.progressToken;
  let notified: Promise<unknown> = Promise.resolve();
  const onCancel = () => {
    const { traceparent, session, principal, grant } = ctx;
    client
      .request(
        Mounts.Dispatcher,
        CANCEL_OP,
        { callId: call.id },
        { traceparent, session, principal, grant, callId: call.id },
      )
      .catch(() => {});
  };
  extra.signal.addEventListener('abort', onCancel, { once: true });
  try {
    const result = await client.request<ToolResult>(
      Mounts.Dispatcher,
      '$call',
      { session: calls.session, call },
      {
        traceparent: ctx.traceparent,
        session: ctx.session,
        principal: ctx.principal,
        grant: ctx.grant,
        callId: call.id,
        timeoutMs: calls.callTimeoutMs,
        onProgress:
          token === undefined
            ? undefined
            : (p) => {
                notified = notified.then(() => notifyProgress((n) => extra.sendNotification(n), token, p));
              },
      },
    );
    // Every report came before the reply: the client hears them before the result, as MCP wants.
    await notified;
    return callToolResultOf(result, calls.outputSchema?.(call.name));
  } catch (err) {
    return dispatcherFailed(call.name, err);
  } finally {
    extra.signal.removeEventListener('abort', onCancel);
  }
}

/**
 * A `tools/call` with `task`: a `$call` with `task {ttlMs}`; answers MCP's `CreateTaskResult`,
 * or the call's refusal as a `CallToolResult`. With a `progressToken`, the task's recorded
 * progress goes out as `notifications/progress` until it ends.
 */
export async function taskCall(
  calls: BridgeCalls,
  call: { id: string; name: string; arguments: Record<string, unknown> },
  ttl: number | undefined,
  extra: HandlerExtra,
): Promise<CallToolResult | { task: McpTask }> {
  const task = ttl === undefined ? {} : { ttlMs: Math.max(1_000, Math.min(ttl, 86_400_000)) };
  let reply: ToolResult | { task: Task };
  try {
    reply = await calls.client.request<ToolResult | { task: Task }>(
      Mounts.Dispatcher,
      '$call',
      { session: calls.session, call, task },
      calls.ctx,
    );
  } catch (err) {
    return dispatcherFailed(call.name, err);
  }
  if (!('task' in reply)) return callToolResultOf(reply, calls.outputSchema?.(call.name));
  const token = extra._meta?.progressToken;
  if (token !== undefined) void followProgress(calls, reply.task.taskId, token);
  return { task: mcpTaskOf(reply.task) };
}

/**
 * Sends the task's progress, each time it changes, until it ends, the bridge stops hearing from it,
 * or the client can no longer be told.
 */
async function followProgress(calls: BridgeCalls, taskId: string, token: string | number) {
  let last = '';
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, FOLLOW_MS).unref());
    let task: Task;
    try {
      task = await calls.client.request<Task>(Mounts.Tasks, '$get', { taskId }, calls.ctx);
    } catch {
      return;
    }
    const seen = JSON.stringify(task.progress ?? null);
    if (task.progress !== undefined && seen !== last) {
      last = seen;
      if (!(await notifyProgress(calls.notify, token, task.progress))) return;
    }
    if (isTerminal(task.status)) return;
  }
}

/** Sends one progress report; resolves whether it went out. */
function notifyProgress(
  send: (notification: ServerNotification) => Promise<void>,
  token: string | number,
  p: Progress,
): Promise<boolean> {
  const params: { progressToken: string | number; progress: number; total?: number; message?: string } = {
    progressToken: token,
    progress: p.progress,
  };
  if (p.total !== undefined) params.total = p.total;
  if (p.message !== undefined) params.message = p.message;
  return send({ method: 'notifications/progress', params }).then(
    () => true,
    () => false,
  );
}

/** A request handler of the bridge: its params as they came, unchecked. */
export type MethodHandler = (params: unknown, extra: HandlerExtra) => Promise<unknown>;

/**
 * `tasks/get`, `tasks/result`, `tasks/cancel` and `tasks/list`, each onto `system.tasks`, by
 * method. Their params are checked here, not by the SDK (whose zod check answers a mismatch
 * with -32603 and the zod dump): a missing or non-string `taskId` is `-32602` in a sentence.
 */
export function taskOps(calls: BridgeCalls, track: <T>(work: Promise<T>) => Promise<T>): Map<string, MethodHandler> {
  const ask = <T>(op: string, body: Record<string, unknown>, timeoutMs = 10_000): Promise<T> =>
    calls.client.request<T>(Mounts.Tasks, op, body, { ...calls.ctx, timeoutMs }).catch((err: unknown) => {
      throw taskOpFailure(err, body.taskId);
    });
  const ops = new Map<string, MethodHandler>();
  ops.set('tasks/get', (params) => track(ask<Task>('$get', { taskId: taskIdOf('tasks/get', params) }).then(mcpTaskOf)));
  ops.set('tasks/cancel', (params) =>
    track(ask<Task>('$cancel', { taskId: taskIdOf('tasks/cancel', params) }).then(mcpTaskOf)),
  );
  ops.set('tasks/list', (params) => {
    const cursor = params !== null && typeof params === 'object' ? (params as { cursor?: unknown }).cursor : undefined;
    if (cursor !== undefined && typeof cursor !== 'string')
      throw new JsonRpcFailure(
        JsonRpcError.InvalidParams,
        `tasks/list params.cursor must be a string, got ${typeof cursor}`,
      );
    return track(
      ask<TaskListReply>('$list', cursor === undefined ? {} : { cursor }).then((page) => {
        const reply: { tasks: McpTask[]; nextCursor?: string } = { tasks: page.tasks.map(mcpTaskOf) };
        if (page.nextCursor !== undefined) reply.nextCursor = page.nextCursor;
        return reply;
      }),
    );
  });
  // MCP's tasks/result waits until the task ends: rounds of system.tasks.$result, 30 s each.
  ops.set('tasks/result', (params, extra) => {
    const taskId = taskIdOf('tasks/result', params);
    return track(
      (async () => {
        for (;;) {
          const got = await ask<ToolResult | Task>(
            '$result',
            { taskId, waitMs: RESULT_ROUND_MS },
            RESULT_ROUND_MS + 10_000,
          );
          if ('isError' in got) {
            const result = callToolResultOf(got, calls.outputSchema?.(got.name));
            result._meta = { [RELATED_TASK]: { taskId } };
            return result;
          }
          if (extra.signal.aborted) throw new JsonRpcFailure(JsonRpcError.InternalError, 'tasks/result was cancelled');
        }
      })(),
    );
  });
  return ops;
}

/** The `taskId` of a task op's params, or `-32602` saying what is wrong. */
function taskIdOf(method: string, params: unknown): string {
  const taskId = params !== null && typeof params === 'object' ? (params as { taskId?: unknown }).taskId : undefined;
  if (typeof taskId === 'string' && taskId !== '') return taskId;
  const got = params === undefined ? 'no params' : taskId === undefined ? 'none' : JSON.stringify(taskId);
  throw new JsonRpcFailure(
    JsonRpcError.InvalidParams,
    `${method} params.taskId must name a task (a string), got ${got}`,
  );
}

/** A failed `system.tasks` op as MCP says it: an unknown task is `-32602 Invalid params`. */
function taskOpFailure(err: unknown, taskId: unknown): Error {
  if (err instanceof NotFoundError) return new JsonRpcFailure(JsonRpcError.InvalidParams, `no task ${String(taskId)}`);
  const why = err instanceof MatrixError ? `${err.code}: ${err.message}` : String(err);
  return new JsonRpcFailure(JsonRpcError.InternalError, `system.tasks answered ${why}`);
}
