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

/** Codes a failed tool result carries: the protocol's, plus `approval_denied` and `cancelled` (its caller stopped it). */
export const ToolErrorCode = { ...ErrorCode, ApprovalDenied: 'approval_denied', Cancelled: 'cancelled' } as const;
export type ToolErrorCode = (typeof ToolErrorCode)[keyof typeof ToolErrorCode];

/** What the model reads back. A failed tool is a result with `isError`, never a thrown error. */
export interface ToolResult {
  callId: string;
  name: string;
  isError: boolean;
  /** Text for the model, at most the content cap. */
  content: string;
  /** The reply itself (resultMode `json`, when it fits the cap). */
  structured?: unknown;
  error?: { code: ToolErrorCode; message: string };
  /** Present when `content` was cut: characters shown and in full. */
  truncated?: { shown: number; total: number };
  /** Time from receiving the call to the result, in ms. */
  durationMs: number;
}

/** `system.approvals.$decide` request. */
export interface ApprovalRequest {
  callId: string;
  tool: string;
  target: string;
  op: string;
  arguments: Record<string, unknown>;
  /** The calling session's id. */
  session?: string;
  /** Who acts. */
  principal?: string;
}

/** `system.approvals.$decide` reply. */
export interface ApprovalDecision {
  decision: 'approve' | 'reject';
  reason?: string;
  /** Who decided. */
  by?: string;
}

/** The audit event of one call, on `system.dispatcher.events.call`. */
export interface CallEvent {
  callId: string;
  name: string;
  target?: string;
  op?: string;
  session?: string;
  principal?: string;
  /** W3C trace context of the call; its trace id is characters 3–34. */
  traceparent?: string;
  /** `cancelled`: its caller stopped it (a task's `$cancel`, an MCP `notifications/cancelled`). */
  outcome: 'ok' | 'error' | 'cancelled';
  code?: string;
  durationMs: number;
  /** Requests sent to the target (0 when it was never called). */
  attempts?: number;
  /** SHA-256 (hex, all 64 digits) of the arguments’ JSON text; never the arguments themselves. */
  argumentsDigest?: string;
  /** Size of the arguments' JSON text. */
  argumentsBytes?: number;
  /** ISO 8601 time the call ended. */
  at: string;
  /** On a call refused for its grant: which check the grant failed (`details.grant`: `missing`, `expired`, …). */
  grantFailure?: string;
  /**
   * On a call refused for its grant: the grant's `sub` when a trusted issuer's signature on it
   * verified (it expired, is not valid yet, or its claims were refused). Whom the issuer named,
   * not proof of who sent it: anyone holding an expired grant can send it.
   */
  grantSubject?: string;
  /** Only on a summary event (name `(refusals)`): refusals without a valid grant counted, not stored one by one. */
  refused?: RefusalSummary;
}

/**
 * Refusals of callers without a valid grant past the dispatcher's rate of stored refusals
 * (PROTOCOL 8): counted, and told in one summary event per interval, so none goes untold.
 */
export interface RefusalSummary {
  /** How many refusals this summary stands for; none of them has an event of its own. */
  count: number;
  /** Of them, how many by reason: the grant's failure (`missing`, `bad_signature`, …), else the error code. */
  reasons: Record<string, number>;
  /** Tool names they named, first seen first, at most 8, each cut to 32 characters. */
  tools: string[];
  /** Of them, how many named a tool not in `tools`. */
  otherTools: number;
  /** ISO 8601 time of the first refusal counted. */
  since: string;
}
