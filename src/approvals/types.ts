/**
 * The shapes of approvals (PROTOCOL section 8): the dispatcher's question, the pending approval
 * a person answers, the ops that list and answer it, and its events. Each wire shape mirrors a
 * schema in `contracts/`.
 */
import { eventSubject, Mounts } from '../bus/subjects.js';

/** The ops of `system.approvals`. */
export const ApprovalOp = {
  /** The dispatcher's question: may this call go ahead? */
  Decide: '$decide',
  /** The pending approvals a person may answer, oldest first. */
  Pending: '$pending',
  /** A person's answer to one pending approval. */
  Answer: '$answer',
} as const;
export type ApprovalOp = (typeof ApprovalOp)[keyof typeof ApprovalOp];

/** The op approvers answer (`system.approvals.$decide`). */
export const DECIDE_OP = ApprovalOp.Decide;

/** Where a new pending approval is told. */
export const PENDING_EVENTS = eventSubject(Mounts.Approvals, 'pending');
/** Where a decision (an answer, or an expiry) is told. */
export const DECIDED_EVENTS = eventSubject(Mounts.Approvals, 'decided');

/** The KV bucket of pending approvals unless configured (`MATRIX_APPROVALS_BUCKET`). */
export const DEFAULT_APPROVALS_BUCKET = 'matrix-approvals';

/** The two answers a person may give; anything else is never an approval. */
export const Answer = { Approve: 'approve', Reject: 'reject' } as const;
export type Answer = (typeof Answer)[keyof typeof Answer];

/** Where a stored approval stands. */
export const ApprovalStatus = {
  /** Waiting for a person. */
  Pending: 'pending',
  /** Approved, not yet used by the call that waits for it. */
  Approved: 'approved',
  /** Rejected: the call is not made. */
  Rejected: 'rejected',
  /** Approved and used by its call: it approves nothing else. */
  Consumed: 'consumed',
} as const;
export type ApprovalStatus = (typeof ApprovalStatus)[keyof typeof ApprovalStatus];

/** `system.approvals.$decide` request (`contracts/approval.request.json`). */
export interface ApprovalRequest {
  /** The LLM's id of the call. */
  callId: string;
  /** The tool's name. */
  tool: string;
  /** The mount the call goes to. */
  target: string;
  /** The op it calls there. */
  op: string;
  /** The call's arguments, as the target would get them. */
  arguments: Record<string, unknown>;
  /** The calling session's id. */
  session?: string;
  /** Who acts. */
  principal?: string;
  /**
   * Unix ms after which the caller no longer waits: a pending approval expires no later. Absent:
   * the policy's `askTimeoutMs` alone.
   */
  deadline?: number;
}

/** `system.approvals.$decide` reply (`contracts/approval.reply.json`). */
export type ApprovalDecision =
  | {
      decision: 'approve' | 'reject';
      reason?: string;
      /** Who decided (`policy`, a person's principal). */
      by?: string;
    }
  | {
      decision: 'pending';
      /** The pending approval to wait for. */
      approvalId: string;
      /** ISO 8601 time past which it is no longer answered (a reject). */
      expiresAt: string;
    };

/** A pending approval as `$pending` lists it (`contracts/approvals.pending.reply.json`). */
export interface PendingApproval {
  approvalId: string;
  callId: string;
  tool: string;
  target: string;
  op: string;
  /**
   * The arguments as the call carried them when their JSON is at most 16 KiB, else the first 16 KiB
   * of that JSON (with `truncated`); `$pending {approvalId}` gives them whole.
   */
  arguments: Record<string, unknown> | string;
  /** Present when `arguments` is a preview: the arguments' JSON is longer. */
  truncated?: true;
  /** SHA-256 (hex) of the arguments' JSON text. */
  argumentsDigest: string;
  /** Length of the arguments' JSON text, in characters. */
  argumentsBytes: number;
  session?: string;
  principal?: string;
  /** ISO 8601 time the call asked. */
  requestedAt: string;
  /** ISO 8601 time past which it is no longer answered. */
  expiresAt: string;
}

/** What the KV bucket holds per call: the pending approval and, once answered, its decision. */
export interface StoredApproval extends PendingApproval {
  status: ApprovalStatus;
  /** Who answered (a grant's `sub`, a claimed principal in development, `terminal`). */
  by?: string;
  /** The answer's reason, when one was given. */
  reason?: string;
  /** ISO 8601 time of the answer. */
  decidedAt?: string;
}

/** `system.approvals.$pending` request. */
export interface PendingRequest {
  /** From the previous page's `nextCursor`. */
  cursor?: string;
  /** Approvals per page, 1..200; default 50. */
  limit?: number;
  /**
   * Only this approval, while it waits, with its whole arguments (a list shows at most 16 KiB of
   * them): `not_found` when unknown, expired or not the caller's to answer; `conflict` once
   * answered. `cursor` and `limit` are then ignored.
   */
  approvalId?: string;
}

/** `system.approvals.$pending` reply. */
export interface PendingReply {
  approvals: PendingApproval[];
  /** Present when more follow: pass it as `cursor`. */
  nextCursor?: string;
}

/** `system.approvals.$answer` request. */
export interface AnswerRequest {
  approvalId: string;
  /** Exactly `approve` or `reject`. */
  decision: Answer;
  /** Why; the model reads a reject's reason. At most 1024 characters. */
  reason?: string;
}

/** `system.approvals.$answer` reply. */
export interface AnswerReply {
  approvalId: string;
  decision: Answer;
  /** Who answered. */
  by: string;
  /** ISO 8601 time of the answer. */
  decidedAt: string;
}

/** `system.approvals.events.pending` and `.decided` (`contracts/approvals.event.json`). */
export interface ApprovalEvent {
  approvalId: string;
  callId: string;
  tool: string;
  target: string;
  op: string;
  session?: string;
  principal?: string;
  /** ISO 8601 expiry of the pending approval. */
  expiresAt: string;
  /** On `.decided`: the answer; an expiry is a `reject` with `expired`. */
  decision?: Answer;
  /** On `.decided`: who answered (absent on an expiry). */
  by?: string;
  /** On `.decided`: the answer's reason. */
  reason?: string;
  /** On `.decided` when nobody answered in time. */
  expired?: true;
}

/** The gate's verdict on one call. */
export type Verdict =
  | {
      approved: true;
      /** Who approved (`policy`, a person). */
      by?: string;
      /** The approval used, when a person approved. */
      approvalId?: string;
      /** Time spent waiting for the person, in ms. */
      waitedMs?: number;
    }
  | {
      approved: false;
      /** Why not, in words for the model. */
      reason: string;
      /** Who rejected, when someone did. */
      by?: string;
      approvalId?: string;
      waitedMs?: number;
    };
