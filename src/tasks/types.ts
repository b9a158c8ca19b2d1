/** The data shapes of tasks (PROTOCOL 9); the wire ones mirror `contracts/task.json` and `contracts/tasks.*.json`. */
import type { Progress } from '../bus/context.js';
import type { ToolCall, ToolResult } from '../dispatcher/types.js';
import type { ResolveRequest } from '../registry/types.js';

/** Where a task is. `completed`, `failed` and `cancelled` are terminal: nothing changes them again. */
export const TaskStatus = {
  Working: 'working',
  InputRequired: 'input_required',
  Completed: 'completed',
  Failed: 'failed',
  Cancelled: 'cancelled',
} as const;
export type TaskStatus = (typeof TaskStatus)[keyof typeof TaskStatus];

/** Is the status one nothing changes again? */
export function isTerminal(status: TaskStatus): boolean {
  return status === TaskStatus.Completed || status === TaskStatus.Failed || status === TaskStatus.Cancelled;
}

/** A tool call that outlives one request, as its caller sees it. */
export interface Task {
  /** 128 random bits, base64url (22 characters). */
  taskId: string;
  /** The LLM's id of the call. */
  callId: string;
  /** The tool called. */
  name: string;
  status: TaskStatus;
  /** One line on the status; names the approvalId while `input_required`. */
  statusMessage?: string;
  /** The target's latest progress report (recorded at most once a second). */
  progress?: Progress;
  /** ISO 8601 time the task was made. */
  createdAt: string;
  /** ISO 8601 time of its last change. */
  lastUpdatedAt: string;
  /** How long it is kept from its creation, in ms. */
  ttlMs: number;
  /** How often to poll it, in ms. */
  pollIntervalMs: number;
}

/** `task` of a `system.dispatcher.$call`: run it as a task. */
export interface TaskRequest {
  /** How long the finished task is kept from its creation, in ms; default 10 min, at most 24 h. */
  ttlMs?: number;
}

/** `system.tasks.$get` and `$cancel` request. */
export interface TaskRef {
  taskId: string;
}

/** `system.tasks.$result` request. */
export interface TaskResultRequest {
  taskId: string;
  /** How long to wait for the task to end, in ms; default 0, at most 30000. */
  waitMs?: number;
}

/** `system.tasks.$list` request. */
export interface TaskListRequest {
  /** `nextCursor` of the page before. */
  cursor?: string;
  /** Only tasks in this status. */
  status?: TaskStatus;
  /** Most tasks in the page; default 50. */
  limit?: number;
}

/** `system.tasks.$list` reply. */
export interface TaskListReply {
  tasks: Task[];
  /** Where the next page starts; absent on the last. */
  nextCursor?: string;
}

/** Whether the task's request has gone to its target: what a takeover may do depends on it. */
export const TaskPhase = { Queued: 'queued', Sent: 'sent' } as const;
export type TaskPhase = (typeof TaskPhase)[keyof typeof TaskPhase];

/**
 * A task as it is stored in KV `matrix-tasks`: what it shows, whose it is, and while it is live
 * all a takeover needs to run it. Once it ends it keeps only what `$get`, `$result` and `$list`
 * answer: the arguments, the session and the grant are dropped (the arguments' digest stays).
 */
export interface TaskRecord {
  task: Task;
  /** The grant's principal and session: whose the task is. */
  owner: { principal?: string; session?: string };
  /** The checked `$resolve` request, as the dispatcher was given it; absent once ended. */
  session?: ResolveRequest;
  /** The call; its `arguments` are absent once ended. */
  call: ToolCall;
  /** SHA-256 (hex) of the call's arguments as JSON: what identifies them once they are dropped. */
  argumentsDigest: string;
  /** The context the dispatcher runs the call with (from the grant); `grant` absent once ended. */
  context: { traceparent?: string; principal?: string; session?: string; grant?: string; readSessions?: string };
  phase: TaskPhase;
  /** The tool may be sent again (annotated idempotent, not gated): a takeover after `sent` sends it again. */
  idempotent: boolean;
  /** The `Matrix-Call-Id` of the request to the target, once sent. */
  targetCallId?: string;
  /** The pending approval's id while `input_required`. */
  approvalId?: string;
  /** The result, once terminal. */
  result?: ToolResult;
  /** Unix ms past which the record is removed (`createdAt + ttlMs`). */
  expiresAt: number;
  /** The instance that runs it, and until when (Unix ms) its claim holds unless renewed. */
  lease: { holder: string; until: number };
}

/** Finished tasks are kept this long from their creation unless the call says otherwise, in ms: 10 min. */
export const DEFAULT_TASK_TTL_MS = 600_000;
/** The longest a task is kept, in ms: 24 h. */
export const MAX_TASK_TTL_MS = 86_400_000;
/** Live tasks (not terminal) one principal may hold at once; past it a new one is refused. */
export const MAX_LIVE_TASKS_PER_PRINCIPAL = 32;
/** Task records (live and finished) one principal may have kept at once; past it a new task is refused. */
export const MAX_TASK_RECORDS_PER_PRINCIPAL = 256;
/** Bytes of task records (live and finished) one principal may have kept at once: 8 MiB. */
export const MAX_TASK_BYTES_PER_PRINCIPAL = 8 * 1024 * 1024;
/**
 * Most bytes of a finished task's record as stored (its value): 96 KiB. A result within the
 * dispatcher's cap (64 KiB of content and structured together) fits with room to spare (the
 * MessagePack of a `structured` holding bytes is kept as base64, a third more); past it the
 * record drops `structured`, then cuts its content, saying so. Each live task counts at least this
 * much against its principal's byte share, so a task's end cannot grow the share past its bound.
 */
export const MAX_FINISHED_TASK_BYTES = 96 * 1024;
/**
 * Most bytes of bucket `matrix-tasks`: 256 MiB. New tasks are refused past seven eighths of it,
 * so tasks already there can still end.
 */
export const TASKS_BUCKET_MAX_BYTES = 256 * 1024 * 1024;
/** Longest `$result` wait, in ms. */
export const MAX_RESULT_WAIT_MS = 30_000;
/** What a task tells its caller to poll at, in ms. */
export const POLL_INTERVAL_MS = 1_000;
