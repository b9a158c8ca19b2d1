/** The data shapes of the dispatcher (PROTOCOL section 6); each mirrors a schema in `contracts/`. */
import { ErrorCode } from '../bus/errors.js';
import type { ResolveRequest } from '../registry/types.js';

/** One tool call as the LLM made it. */
export interface ToolCall {
  /** The LLM's id for the call; echoed as `callId`. */
  id: string;
  /** The tool's name. */
  name: string;
  /** The arguments: an object, or its JSON text as providers send it; absent means `{}`. */
  arguments?: Record<string, unknown> | string;
}

/** `system.dispatcher.$call` request. */
export interface CallRequest {
  /** The `$resolve` request of the calling session. */
  session: ResolveRequest;
  call: ToolCall;
  /** Run the call as a task (PROTOCOL 9): answered at once with `{task}`. */
  task?: { ttlMs?: number };
}

/**
 * Codes a failed tool result carries: the protocol's, plus `approval_denied` and `cancelled` (its
 * caller stopped it).
 */
export const ToolErrorCode = { ...ErrorCode, ApprovalDenied: 'approval_denied', Cancelled: 'cancelled' } as const;
export type ToolErrorCode = (typeof ToolErrorCode)[keyof typeof ToolErrorCode];

/** What the model reads back. A failed tool is a result with `isError`, never a thrown error. */
export interface ToolResult {
  callId: string;
  name: string;
  isError: boolean;
  /** Text for the model, at most the content cap (in bytes of its JSON string, UTF-8). */
  content: string;
  /** The reply itself (resultMode `json`), when its encoding fits in what `content` left of the cap. */
  structured?: unknown;
  error?: { code: ToolErrorCode; message: string };
  /** Present when `content` was cut: characters shown and in full. */
  truncated?: { shown: number; total: number };
  /** Time from receiving the call to the result, in ms. */
  durationMs: number;
}

export type { ApprovalDecision, ApprovalRequest } from '../approvals/types.js';
