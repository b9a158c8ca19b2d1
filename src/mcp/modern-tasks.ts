/**
 * Tasks as MCP 2026-07-28's tasks extension (`io.modelcontextprotocol/tasks`) shows them, mapped
 * onto `system.tasks` (PROTOCOL 9, 15): `tasks/get` carries the result inline, `tasks/update`
 * and `tasks/cancel` answer an empty ack, `tasks/result` and `tasks/list` do not exist. Every
 * answer is read from the bus, so any bridge process answers for a task made through another.
 */
import { MissingRequiredClientCapabilityError, ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import type { BusClient } from '../bus/client.js';
import type { CallContext } from '../bus/context.js';
import { MatrixError, NotFoundError } from '../bus/errors.js';
import { Mounts } from '../bus/subjects.js';
import type { ToolResult } from '../dispatcher/types.js';
import { isTerminal, type Task } from '../tasks/types.js';
import { callToolResultOf } from './bridge-tasks.js';

/** The extension's identifier, declared `{}` under `capabilities.extensions` by both sides. */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** The `_meta` key a 2026-07-28 request names its client's capabilities under. */
const CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';

/** The task statuses a 2026-07-28 client sees (the extension's). */
export type ModernTaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

/** A task as the extension shows it: flat, durations in ms under their `Ms` names. */
export interface ModernTask {
  taskId: string;
  status: ModernTaskStatus;
  /** One line on the status; names the approvalId while an approval is pending. */
  statusMessage?: string;
  /** ISO 8601. */
  createdAt: string;
  /** ISO 8601. */
  lastUpdatedAt: string;
  /** How long the task is kept from its creation, in ms. */
  ttlMs: number;
  /** How often to poll it, in ms. */
  pollIntervalMs: number;
}

/** What a tasks op is asked with: the bus client and the caller's context. */
export interface TaskCaller {
  client: BusClient;
  ctx: CallContext;
  /** The tools the caller is listed with an `outputSchema` (none when absent). */
  outputSchemas?: () => Promise<ReadonlySet<string>>;
}

/** The request's `_meta` as the SDK hands it to a handler (its envelope keys lifted out). */
export interface RequestEnvelope {
  envelope?: Record<string, unknown>;
  _meta?: Record<string, unknown>;
}

/** Did the request's client declare the tasks extension (per request, in its `_meta`)? */
export function declaresTasks(req: RequestEnvelope): boolean {
  const caps = (req.envelope?.[CLIENT_CAPABILITIES] ?? req._meta?.[CLIENT_CAPABILITIES]) as
    | { extensions?: Record<string, unknown> }
    | undefined;
  const declared = caps?.extensions?.[TASKS_EXTENSION];
  return declared !== undefined && declared !== null;
}

/** `-32021`: the request needs the tasks extension its client did not declare. */
export function tasksRequired(why: string): MissingRequiredClientCapabilityError {
  return new MissingRequiredClientCapabilityError(
    { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
    why,
  );
}

/**
 * A bus task as a 2026 client sees it. A pending approval (`input_required` on the bus) shows as
 * `working` with the approval named in `statusMessage`: in 2026 `input_required` means the client
 * must answer `inputRequests` through `tasks/update`, and an approval is a person's answer given
 * elsewhere, never the calling client's.
 */
export function modernTaskOf(task: Task): ModernTask {
  const shown: ModernTask = {
    taskId: task.taskId,
    status: task.status === 'input_required' ? 'working' : task.status,
    createdAt: task.createdAt,
    lastUpdatedAt: task.lastUpdatedAt,
    ttlMs: Math.round(task.ttlMs),
    pollIntervalMs: Math.round(task.pollIntervalMs),
  };
  if (task.statusMessage !== undefined) shown.statusMessage = task.statusMessage;
  return shown;
}

/**
 * The bus error codes that say the bridge or the bus failed, not the tool: a task that ends with
 * one is `failed` with a JSON-RPC `error`; every other failure is the tool's, a `completed` task
 * whose result has `isError` (the model reads it as it reads a plain call's).
 */
const PROTOCOL_FAILURES: ReadonlySet<string> = new Set(['internal']);

/** `tasks/get`: the task, and once it ended its result (or error) inline. */
export async function getTask(caller: TaskCaller, taskId: string): Promise<Record<string, unknown>> {
  const task = await ask<Task>(caller, '$get', taskId);
  const shown: Record<string, unknown> = { ...modernTaskOf(task) };
  if (!isTerminal(task.status) || task.status === 'cancelled') return shown;
  const got = await ask<ToolResult | Task>(caller, '$result', taskId, { waitMs: 0 });
  if (!('isError' in got)) return shown;
  if (task.status === 'failed' && PROTOCOL_FAILURES.has(got.error?.code ?? '')) {
    shown.status = 'failed';
    shown.error = { code: ProtocolErrorCode.InternalError, message: got.content };
    return shown;
  }
  shown.status = 'completed';
  const schemas = await caller.outputSchemas?.().catch(() => undefined);
  shown.result = callToolResultOf(got, schemas?.has(got.name) ?? false);
  return shown;
}

/** `tasks/cancel`: cancels unless already ended; the empty ack either way. */
export async function cancelTask(caller: TaskCaller, taskId: string): Promise<Record<string, never>> {
  await ask<Task>(caller, '$cancel', taskId);
  return {};
}

/**
 * `tasks/update`: a bus task never asks its client for input (an approval is answered by a
 * person, PROTOCOL 8), so there is nothing to deliver; the task must exist and the ack is empty.
 */
export async function updateTask(caller: TaskCaller, taskId: string): Promise<Record<string, never>> {
  await ask<Task>(caller, '$get', taskId);
  return {};
}

/** The `taskId` of a tasks op's params, or `-32602` saying what is wrong. */
export function taskIdOf(method: string, params: unknown): string {
  const taskId = params !== null && typeof params === 'object' ? (params as { taskId?: unknown }).taskId : undefined;
  if (typeof taskId === 'string' && taskId !== '') return taskId;
  throw new ProtocolError(
    ProtocolErrorCode.InvalidParams,
    `${method} params.taskId must name a task (a non-empty string), got ${taskId === undefined ? 'none' : JSON.stringify(taskId)}`,
  );
}

function ask<T>(caller: TaskCaller, op: string, taskId: string, extra: Record<string, unknown> = {}): Promise<T> {
  return caller.client
    .request<T>(Mounts.Tasks, op, { taskId, ...extra }, { ...caller.ctx, timeoutMs: 10_000 })
    .catch((err: unknown) => {
      if (err instanceof NotFoundError) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `no task ${taskId}`);
      const why = err instanceof MatrixError ? `${err.code}: ${err.message}` : String(err);
      throw new ProtocolError(ProtocolErrorCode.InternalError, `system.tasks answered ${why}`);
    });
}
