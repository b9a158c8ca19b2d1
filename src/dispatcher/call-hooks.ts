/**
 * What a caller may hear of a call while it runs and do to it (PROTOCOL 10): the target's
 * progress, a cancel, the approval's wait, the moment it is sent. A plain `$call` has none; a
 * task and the MCP bridge's calls do (`system-dispatcher.ts` relays a `$call` caller's). Also the
 * bus act they need: the `<target>.$cancel {callId}` sent once when its caller stops.
 */

import { approvalGate, awaitDecision, type Verdict } from '../approvals/gate.js';
import type { BusClient } from '../bus/client.js';
import type { CallContext, Progress } from '../bus/context.js';
import { CANCEL_OP } from '../bus/subjects.js';
import { countCancel } from '../telemetry/calls.js';
import type { ApprovalRequest } from './types.js';

/** A pending approval as its gate tells it: what `input_required` names. */
export interface PendingApproval {
  approvalId: string;
  /** ISO 8601 time the approval request expires. */
  expiresAt?: string;
}

/** What a caller hears of one call and may do to it; every field optional. */
export interface CallHooks {
  /** Told of the target's progress reports, at most one per `progressEveryMs`. */
  onProgress?: (progress: Progress) => void;
  /**
   * Shortest time between two reports `onProgress` is told of, in ms: the latest within it is
   * held back undecoded (`RequestOptions.progressEveryMs`). Default 0: each report.
   */
  progressEveryMs?: number;
  /** Cancels the call: before the target, nothing is sent; after, the target is sent `$cancel`. */
  signal?: AbortSignal;
  /** Told when its approval is pending a person's decision (a task is then `input_required`). */
  onPending?: (pending: PendingApproval) => void;
  /** Waits for this pending approval instead of asking again (a task taken over while `input_required`). */
  approvalId?: string;
  /**
   * Awaited just before the request goes to the target, with its `Matrix-Call-Id` (a task marks
   * itself sent, compare-and-set); a throw stops the call unsent.
   */
  beforeSend?: (callId: string) => Promise<void>;
  /**
   * Awaited before its approval is used: false leaves the approval unused and the call unsent (a
   * task renews its lease here, so one another instance claimed does not spend it).
   */
  beforeConsume?: () => Promise<boolean>;
  /** The call runs as a task: a tool whose `execution.taskSupport` is `required` is refused without this. */
  asTask?: boolean;
  /** Longest wait for an approver, in ms, instead of the dispatcher's (a task waits longer than a request can). */
  approvalTimeoutMs?: number;
}

/** How long the dispatcher waits for a target's `{cancelled: true}`, in ms: only for the log, never retried. */
const CANCEL_WAIT_MS = 2_000;

/**
 * Sends `<target>.$cancel {callId}` once, with the call's context headers. A mount that holds
 * the call stops it and answers `{cancelled: true}`; one without `$cancel` is left alone: no
 * answer, an error or no responders are all the same, and nothing is sent again.
 */
export function cancelTarget(client: BusClient, target: string, callId: string, ctx: CallContext): void {
  countCancel();
  const { traceparent, session, principal, readSessions } = ctx;
  client
    .request(
      target,
      CANCEL_OP,
      { callId },
      { traceparent, session, principal, readSessions, callId, timeoutMs: CANCEL_WAIT_MS },
    )
    .catch(() => {});
}

/** How the approval step waits: the call's deadline, the service's stop, the bucket. */
export interface ApprovalWait {
  /** Unix ms: no wait for a person goes past it. */
  deadlineMs: number;
  /** Aborted when the service stops: the wait ends, its approval stays pending for the call sent again. */
  stopping?: AbortSignal;
  /** KV bucket of pending approvals; default `matrix-approvals`. */
  bucket?: string;
  /** How long the wait was given, in ms, for the words of a timeout (`GateOptions.windowMs`). */
  windowMs?: number;
}

/**
 * The approval step with the call's hooks: the gate (ask `$decide`, wait for a person, fail
 * closed), or, with `hooks.approvalId`, the wait alone for an approval already pending. The
 * call's signal withdraws the approval (a cancelled wait is never a yes); the service stopping
 * keeps it.
 */
export function waitForApproval(
  client: BusClient,
  request: ApprovalRequest,
  ctx: CallContext,
  wait: ApprovalWait,
  hooks: CallHooks | undefined,
): Promise<Verdict> {
  const signals = [hooks?.signal, wait.stopping].filter((s): s is AbortSignal => s !== undefined);
  const signal = signals.length < 2 ? signals[0] : AbortSignal.any(signals);
  // A task waits for a person as long as it is kept, not as long as one request may take.
  const deadlineMs = hooks?.approvalTimeoutMs === undefined ? wait.deadlineMs : Date.now() + hooks.approvalTimeoutMs;
  const windowMs = hooks?.approvalTimeoutMs ?? wait.windowMs;
  const options = { deadlineMs, signal, bucket: wait.bucket, windowMs, beforeConsume: hooks?.beforeConsume };
  if (hooks?.approvalId !== undefined) return awaitDecision(client, hooks.approvalId, options);
  return approvalGate(client, request, ctx, { ...options, onPending: hooks?.onPending });
}
