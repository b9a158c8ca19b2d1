/**
 * One tool call of a session, through `system.dispatcher.$call`: plain (wait for the result),
 * or as a task (PROTOCOL 9: a handle at once, then `system.tasks.$result` until it ends), with
 * an abort signal and progress.
 */
import type { BusClient } from '../bus/client.js';
import type { CallContext } from '../bus/context.js';
import { Mounts } from '../bus/subjects.js';
import type { ToolCall, ToolResult } from '../dispatcher/types.js';
import type { ResolvedTool, ResolveRequest } from '../registry/types.js';

/** Progress of a running call, as its target reported it (PROTOCOL 10). */
export interface CallProgress {
  /** Work done so far, in the target's units. */
  progress: number;
  /** Work in all, when the target knows it. */
  total?: number;
  message?: string;
}

/** How one call runs. */
export interface CallOptions {
  /** Aborting stops the call: a task is cancelled (`system.tasks.$cancel`); a plain call is no longer waited for. The promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Run it as a task (PROTOCOL 9) and wait for its result; `{ttlMs}` keeps the finished task that long (default 1 h). */
  task?: boolean | { ttlMs?: number };
  /** Told each new progress the task reports. */
  onProgress?: (progress: CallProgress) => void;
}

/** The task handle of PROTOCOL 9, the fields a caller waits on. */
export interface TaskHandle {
  /** 128 random bits, hex. */
  taskId: string;
  callId: string;
  name: string;
  status: 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';
  statusMessage?: string;
  progress?: CallProgress;
  /** How often to poll, in ms. */
  pollIntervalMs?: number;
}

/** Longest wait of one `system.tasks.$result`, in ms (the op takes at most 30000). */
const RESULT_WAIT_MS = 25_000;
/** The wait of one `$result` while progress is wanted: progress is read between waits. */
const PROGRESS_WAIT_MS = 1_000;
/** How long the request of one `$result` may take beyond its wait, in ms. */
const RESULT_SLACK_MS = 5_000;

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
  const task = options.task ?? (taskSupportOf(tool) === 'required' ? true : undefined);
  if (task === undefined || task === false) {
    const reply = client.request<ToolResult>(
      Mounts.Dispatcher,
      '$call',
      { session: request, call },
      withTimeout(ctx, timeoutMs),
    );
    return abortable(reply, signal);
  }
  const body = { session: request, call, task: task === true ? {} : task };
  const started = await abortable(
    client.request<ToolResult | { task: TaskHandle }>(Mounts.Dispatcher, '$call', body, withTimeout(ctx, timeoutMs)),
    signal,
  );
  if (!('task' in started)) return started;
  return awaitTask(client, started.task, ctx, options);
}

/** Waits for a task's result; on abort, cancels it and rejects with the signal's reason. */
async function awaitTask(
  client: BusClient,
  task: TaskHandle,
  ctx: CallContext,
  options: CallOptions,
): Promise<ToolResult> {
  const { signal, onProgress } = options;
  const cancel = () =>
    void client
      .request(Mounts.Tasks, '$cancel', { taskId: task.taskId }, withTimeout(ctx, RESULT_SLACK_MS))
      .catch(() => {});
  signal?.addEventListener('abort', cancel, { once: true });
  try {
    let last = '';
    const waitMs = onProgress === undefined ? RESULT_WAIT_MS : PROGRESS_WAIT_MS;
    for (;;) {
      signal?.throwIfAborted();
      const reply = await abortable(
        client.request<ToolResult | TaskHandle>(
          Mounts.Tasks,
          '$result',
          { taskId: task.taskId, waitMs },
          withTimeout(ctx, waitMs + RESULT_SLACK_MS),
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

/** A tool's `execution.taskSupport` (PROTOCOL 9), when its projection carries one. */
function taskSupportOf(tool: ResolvedTool | undefined): string | undefined {
  const execution: unknown = tool === undefined ? undefined : Reflect.get(tool, 'execution');
  if (execution === null || typeof execution !== 'object') return undefined;
  const support: unknown = Reflect.get(execution, 'taskSupport');
  return typeof support === 'string' ? support : undefined;
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
