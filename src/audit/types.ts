/**
 * The audit trail's data shapes: the event of one call, as published on
 * `system.dispatcher.events.call` and stored in the trail, and the summary of counted refusals.
 */

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
  /** On a call a person was asked about: its pending approval's id (PROTOCOL 8). */
  approvalId?: string;
  /** On an approved gated call: who approved it (a person's principal, `policy`, `terminal`). */
  approvedBy?: string;
  /** On a rejected gated call: who rejected it. */
  rejectedBy?: string;
  /** On a call a person was asked about: how long it waited for the answer, in ms. */
  approvalWaitMs?: number;
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

/** A call's event at its start: every field present (so every event has one object shape), none filled in but its id and name. */
export function newCallEvent(callId: string, name: string): CallEvent {
  return {
    callId,
    name,
    target: undefined,
    op: undefined,
    session: undefined,
    principal: undefined,
    traceparent: undefined,
    outcome: 'ok',
    code: undefined,
    durationMs: 0,
    attempts: 0,
    argumentsDigest: undefined,
    argumentsBytes: undefined,
    at: '',
    grantFailure: undefined,
    grantSubject: undefined,
    approvalId: undefined,
    approvedBy: undefined,
    rejectedBy: undefined,
    approvalWaitMs: undefined,
    refused: undefined,
  };
}
