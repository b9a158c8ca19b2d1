/**
 * One tool call of a session, through `system.dispatcher.$call`: plain (wait for the result),
 * or as a task (PROTOCOL 9: a handle at once, then `system.tasks.$result` until it ends), with
 * an abort signal and progress.
 */
import { randomBytes } from 'node:crypto';
import type { BusClient } from '../bus/client.js';
import type { CallContext, Progress } from '../bus/context.js';
import { CANCEL_OP, Mounts } from '../bus/subjects.js';
import type { ToolCall, ToolResult } from '../dispatcher/types.js';
import type { ResolvedTool, ResolveRequest } from '../registry/types.js';
import type { Task } from '../tasks/types.js';

/** Progress of a running call, as its target reported it (PROTOCOL 10). */
export type CallProgress = Progress;

/** How one call runs. */
export interface CallOptions {
  /**
   * Aborting cancels the call: a task through `system.tasks.$cancel`, a plain call through
   * `system.dispatcher.$cancel` (the dispatcher then sends the target `$cancel`). The promise
   * rejects with the signal's reason at once.
   */
  signal?: AbortSignal;
  /**
   * Run it as a task (PROTOCOL 9) and wait for its result; `{ttlMs}` keeps the finished task that
   * long (default 1 h).
   */
  task?: boolean | { ttlMs?: number };
  /** Told each progress report of the target: relayed on a plain call, read from the task on a task. */
  onProgress?: (progress: CallProgress) => void;
}

/** Longest wait of one `system.tasks.$result`, in ms (the op takes at most 30000). */
const RESULT_WAIT_MS = 25_000;
/** The wait of one `$result` while progress is wanted: progress is read between waits. */
const PROGRESS_WAIT_MS = 1_000;
/** How long one request beside the call (`$result`'s slack, a `$cancel`) may take, in ms. */
const SIDE_REQUEST_MS = 5_000;

/** Runs `call` for the session `request` with `ctx` (its grant), as `options` say. */
export async function runCall(
  client: BusClient,
  request: ResolveRequest,
  call: ToolCall,
  ctx: CallContext,
  timeoutMs: number,
  tool: ResolvedTool | undefined,
  options: CallOptions,
): Promise<ToolResult> {
  const { signal } = options;
  signal?.throwIfAborted();
  const task = options.task ?? (tool?.execution?.taskSupport === 'required' ? true : undefined);
  if (task === undefined || task === false) return plainCall(client, request, call, ctx, timeoutMs, options);
  const body = { session: request, call, task: task === true ? {} : task };
  const started = await abortable(
    client.request<ToolResult | { task: Task }>(Mounts.Dispatcher, '$call', body, withTimeout(ctx, timeoutMs)),
    signal,
  );
  if (!('task' in started)) return started;
  return awaitTask(client, started.task, ctx, options);
}

/** A plain `$call` under a `Matrix-Call-Id` of its own, so that an abort can name it in `system.dispatcher.$cancel`. */
function plainCall(
  client: BusClient,
  request: ResolveRequest,
  call: ToolCall,
  ctx: CallContext,
  timeoutMs: number,
  options: CallOptions,
): Promise<ToolResult> {
  const { signal, onProgress } = options;
  const callId = randomBytes(12).toString('base64url');
  const sent: CallContext & { timeoutMs: number; onProgress?: (p: Progress) => void } = withTimeout(ctx, timeoutMs);
  sent.callId = callId;
  if (onProgress !== undefined) sent.onProgress = onProgress;
  const reply = client.request<ToolResult>(Mounts.Dispatcher, '$call', { session: request, call }, sent);
  if (signal === undefined) return reply;
  const cancel = () => {
    const cancelling = withTimeout(ctx, SIDE_REQUEST_MS);
    cancelling.callId = callId;
    client.request(Mounts.Dispatcher, CANCEL_OP, { callId }, cancelling).catch(() => {});
  };
  signal.addEventListener('abort', cancel, { once: true });
  const done = () => signal.removeEventListener('abort', cancel);
  reply.then(done, done);
  return abortable(reply, signal);
}

/** Waits for a task's result; on abort, cancels it and rejects with the signal's reason. */
async function awaitTask(client: BusClient, task: Task, ctx: CallContext, options: CallOptions): Promise<ToolResult> {
  const { signal, onProgress } = options;
  const cancel = () =>
    void client
      .request(Mounts.Tasks, CANCEL_OP, { taskId: task.taskId }, withTimeout(ctx, SIDE_REQUEST_MS))
      .catch(() => {});
  signal?.addEventListener('abort', cancel, { once: true });
  try {
    let last = '';
    const waitMs = onProgress === undefined ? RESULT_WAIT_MS : PROGRESS_WAIT_MS;
    for (;;) {
      signal?.throwIfAborted();
      const reply = await abortable(
        client.request<ToolResult | Task>(
          Mounts.Tasks,
          '$result',
          { taskId: task.taskId, waitMs },
          withTimeout(ctx, waitMs + SIDE_REQUEST_MS),
        ),
        signal,
      );
      if (!('taskId' in reply)) return reply;
      if (reply.progress !== undefined && onProgress !== undefined) {
        const seen = JSON.stringify(reply.progress);
        if (seen !== last) {
          last = seen;
          onProgress(reply.progress);
        }
      }
    }
  } finally {
    signal?.removeEventListener('abort', cancel);
  }
}

function withTimeout(ctx: CallContext, timeoutMs: number): CallContext & { timeoutMs: number } {
  return { ...ctx, timeoutMs };
}

/** `work`, or the signal's reason once it aborts (the work itself is left to end on its own). */
function abortable<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return work;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}
