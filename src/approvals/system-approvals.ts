/**
 * `system.approvals` (PROTOCOL 8): `$decide` applies the policy and, where it says ask, stores
 * a pending approval and answers `pending` at once; `$pending` lists what the caller may
 * answer; `$answer` records a person's decision, the first one winning. Every instance serves
 * the same bucket, so any instance answers any approval, and all of it survives restarts.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { encodeBody } from '../bus/codec.js';
import type { CallContext } from '../bus/context.js';
import { SchemaId } from '../bus/contracts.js';
import { BadRequestError, ConflictError, ForbiddenError, NotFoundError, PayloadTooLargeError } from '../bus/errors.js';
import { type Logger, silentLogger } from '../bus/log.js';
import { Mount } from '../bus/mount.js';
import { Mounts } from '../bus/subjects.js';
import { IdentityGate } from '../identity/gate.js';
import { approverOf, covered, isOwn, mayAnswer } from './approvers.js';
import type { Asker } from './asker.js';
import { ApprovalBook, DEFAULT_SWEEP_MS } from './book.js';
import { type ApprovalPolicyFile, decideByPolicy, expiryOf } from './policy.js';
import { ApprovalStore, keyOfCall, listed } from './store.js';
import {
  type AnswerReply,
  type AnswerRequest,
  type ApprovalDecision,
  type ApprovalEvent,
  ApprovalOp,
  type ApprovalRequest,
  DECIDED_EVENTS,
  PENDING_EVENTS,
  type PendingReply,
  type PendingRequest,
  type StoredApproval,
} from './types.js';

/** Most approvals one bucket holds live; past it a call that needs a person is rejected (fail closed). */
export const MAX_LIVE_APPROVALS = 10_000;
/** Most live approvals of one principal (`''`, no principal, counts as one); past it only its calls are rejected. */
export const MAX_LIVE_APPROVALS_PER_PRINCIPAL = 100;
/** Most live approvals of one session; past it only that session's calls are rejected. */
export const MAX_LIVE_APPROVALS_PER_SESSION = 50;

/** How many approvals may be live (pending, or approved and unused) at once; each past its bound is a reject. */
export interface ApprovalLimits {
  /** Of one principal; default the policy's `maxPendingPerPrincipal`, else 100. */
  perPrincipal?: number;
  /** Of one session; default the policy's `maxPendingPerSession`, else 50. */
  perSession?: number;
  /** In the whole bucket, the backstop; default 10000. */
  total?: number;
}
const DEFAULT_PAGE = 50;

/** How the approvals mount is built. */
export interface ApprovalsMountOptions {
  /** The rules; default: ask for every call. */
  policy?: ApprovalPolicyFile;
  /** One more way to answer (the terminal, in development). */
  asker?: Asker;
  /** Who may answer: with trusted issuers, approver grants only; default trusting callers (development). */
  identity?: IdentityGate;
  /** KV bucket of pending approvals; default `matrix-approvals`. */
  bucket?: string;
  /** Copies a JetStream cluster keeps when this creates the bucket; default 1. */
  replicas?: number;
  /** How often expired approvals are removed, in ms; default 5000. */
  sweepMs?: number;
  /** Where a failing watch or sweep is logged; default nowhere. */
  logger?: Logger;
  /** Bounds on live approvals per principal, per session and in all. */
  limits?: ApprovalLimits;
}

/** Builds the `system.approvals` mount on its bucket; rejects with `UnavailableError` without JetStream. */
export async function approvalsMount(nc: NatsConnection, options: ApprovalsMountOptions = {}): Promise<Mount> {
  const policy = options.policy ?? { default: 'ask' };
  const identity = options.identity ?? IdentityGate.trustingCallers();
  const logger = options.logger ?? silentLogger;
  const limits = {
    perPrincipal: options.limits?.perPrincipal ?? policy.maxPendingPerPrincipal ?? MAX_LIVE_APPROVALS_PER_PRINCIPAL,
    perSession: options.limits?.perSession ?? policy.maxPendingPerSession ?? MAX_LIVE_APPROVALS_PER_SESSION,
    total: options.limits?.total ?? MAX_LIVE_APPROVALS,
  };
  const store = await ApprovalStore.open(nc, { bucket: options.bucket, replicas: options.replicas });
  const tell = (subject: string, record: StoredApproval, decided?: Partial<ApprovalEvent>) =>
    nc.publish(subject, encodeBody(eventOf(record, decided)));
  const book = new ApprovalBook(
    store,
    (record) => tell(DECIDED_EVENTS, record, { decision: 'reject', expired: true }),
    logger,
  );
  await book.start(options.sweepMs ?? DEFAULT_SWEEP_MS);

  const ask = (record: StoredApproval) => {
    const asker = options.asker;
    if (asker === undefined) return;
    const withdrawn = new AbortController();
    const timer = setTimeout(() => withdrawn.abort(), Date.parse(record.expiresAt) - Date.now());
    const stopListening = book.whenSettled(record.approvalId, () => withdrawn.abort());
    asker
      .ask(listed(record), withdrawn.signal)
      .then(async (answer) => {
        if (answer === undefined || withdrawn.signal.aborted) return;
        const decided = await store.answer(record.approvalId, answer.decision, 'terminal', answer.reason);
        tell(DECIDED_EVENTS, decided, { decision: answer.decision, by: 'terminal', reason: answer.reason });
      })
      .catch(() => {}) // answered elsewhere first, or expired: the first answer counts
      .finally(() => {
        clearTimeout(timer);
        stopListening();
      });
  };

  return new Mount(nc, {
    name: Mounts.Approvals,
    version: '0.2.0',
    description:
      'Approves or rejects gated tool calls by policy; where it says ask, a person answers a durable pending approval.',
    logger,
    onStop: () => book.stop(),
    ops: {
      [ApprovalOp.Decide]: {
        description: 'Decides whether a gated call may go ahead, or stores it as a pending approval for a person.',
        request: SchemaId.ApprovalRequest,
        response: SchemaId.ApprovalReply,
        handle: async (request: ApprovalRequest): Promise<ApprovalDecision> => {
          const { decision, reason } = decideByPolicy(policy, request);
          if (decision === 'allow') return { decision: 'approve', by: 'policy', ...(reason ? { reason } : {}) };
          if (decision === 'deny')
            return { decision: 'reject', by: 'policy', reason: reason ?? 'the approval policy denies it' };
          const now = Date.now();
          if (request.deadline !== undefined && request.deadline <= now)
            return {
              decision: 'reject',
              by: 'policy',
              reason: "the caller's deadline passed before a person could answer",
            };
          const key = keyOfCall(request);
          const full = book.isLive(key, now) ? undefined : overLimit(limits, book, request);
          if (full !== undefined) return { decision: 'reject', by: 'policy', reason: full };
          const release = book.reserve(request.principal, request.session);
          let asked: Awaited<ReturnType<ApprovalStore['ask']>>;
          try {
            asked = await store.ask(request, expiryOf(policy, request.deadline, now), now);
            if (asked.revision !== undefined) book.remember(key, { record: asked.record, revision: asked.revision });
          } catch (err) {
            if (err instanceof ConflictError || err instanceof PayloadTooLargeError)
              return { decision: 'reject', by: 'policy', reason: err.message };
            throw err;
          } finally {
            release();
          }
          const { record } = asked;
          if (asked.created) {
            tell(PENDING_EVENTS, record);
            ask(record);
          }
          return { decision: 'pending', approvalId: record.approvalId, expiresAt: record.expiresAt };
        },
      },
      [ApprovalOp.Pending]: {
        description:
          'Lists the pending approvals the caller may answer, oldest first, with their arguments; with approvalId, that one with its whole arguments.',
        request: SchemaId.ApprovalsPendingRequest,
        response: SchemaId.ApprovalsPendingReply,
        // The approver's grant, and its holder, before the body is read.
        beforeBody: identity.beforeBody,
        handle: async (request: PendingRequest, ctx: CallContext): Promise<PendingReply> => {
          const approver = approverOf(identity, ctx);
          // One approval by id: read from the bucket, not the mirror, which may not have heard it yet.
          if (request.approvalId !== undefined) {
            const one = await store.waiting(request.approvalId, (record) => mayAnswer(approver, record));
            return { approvals: [listed(one.record, true)] };
          }
          const after = cursorOf(request.cursor);
          const limit = request.limit ?? DEFAULT_PAGE;
          const page: PendingReply = { approvals: [] };
          for (const record of book.pending()) {
            if (after !== undefined && orderKey(record) <= after) continue;
            if (!mayAnswer(approver, record)) continue;
            if (page.approvals.length === limit) {
              page.nextCursor = cursorFrom(page.approvals[limit - 1] as StoredApproval);
              break;
            }
            page.approvals.push(listed(record));
          }
          return page;
        },
      },
      [ApprovalOp.Answer]: {
        description: 'Approves or rejects one pending approval; the first answer counts.',
        request: SchemaId.ApprovalsAnswerRequest,
        response: SchemaId.ApprovalsAnswerReply,
        beforeBody: identity.beforeBody,
        handle: async (request: AnswerRequest, ctx: CallContext): Promise<AnswerReply> => {
          const approver = approverOf(identity, ctx);
          const found = await store.get(request.approvalId);
          if (found === undefined || Date.parse(found.record.expiresAt) <= Date.now())
            throw new NotFoundError(`no pending approval ${request.approvalId}: it is unknown or it expired`);
          const record = found.record;
          if (isOwn(approver, record))
            throw new ForbiddenError(`${approver.by} may not answer the approval of its own call`);
          if (!covered(approver.covers, record))
            throw new ForbiddenError(
              `the grant of ${approver.by} does not cover ${record.tool} → ${record.target}.${record.op}${record.principal ? ` for ${record.principal}` : ''} (its nats.approve)`,
            );
          const decided = await store.decide(found, request.decision, approver.by, request.reason);
          tell(DECIDED_EVENTS, decided, { decision: request.decision, by: approver.by, reason: request.reason });
          return {
            approvalId: decided.approvalId,
            decision: request.decision,
            by: approver.by,
            decidedAt: decided.decidedAt as string,
          };
        },
      },
    },
  });
}

/**
 * Why a new approval for `request` would be past a bound (the caller's principal first, then
 * its session, then the bucket), or undefined. A call whose approval is live already (a resend)
 * is never counted again.
 */
function overLimit(limits: Required<ApprovalLimits>, book: ApprovalBook, request: ApprovalRequest): string | undefined {
  const live = book.live(request.principal, request.session);
  const answerFirst = 'until a person answers some or they expire';
  if (live.principal >= limits.perPrincipal)
    return `${request.principal ?? 'this unnamed caller'} has ${live.principal} approvals pending already (at most ${limits.perPrincipal} per principal): no new one ${answerFirst}`;
  if (request.session !== undefined && live.session >= limits.perSession)
    return `session ${request.session} has ${live.session} approvals pending already (at most ${limits.perSession} per session): no new one ${answerFirst}`;
  if (live.total >= limits.total)
    return `${live.total} approvals are pending already (at most ${limits.total} in all): no new one ${answerFirst}`;
  return undefined;
}

/** The event of a pending approval; a decided one adds the answer. */
export function eventOf(record: StoredApproval, decided: Partial<ApprovalEvent> = {}): ApprovalEvent {
  const event: ApprovalEvent = {
    approvalId: record.approvalId,
    callId: record.callId,
    tool: record.tool,
    target: record.target,
    op: record.op,
    expiresAt: record.expiresAt,
  };
  if (record.session !== undefined) event.session = record.session;
  if (record.principal !== undefined) event.principal = record.principal;
  if (decided.decision !== undefined) event.decision = decided.decision;
  if (decided.by !== undefined) event.by = decided.by;
  if (decided.reason !== undefined) event.reason = decided.reason;
  if (decided.expired) event.expired = true;
  return event;
}

/** Where an approval stands in the oldest-first order. */
function orderKey(record: { requestedAt: string; approvalId: string }): string {
  return `${record.requestedAt}|${record.approvalId}`;
}

function cursorFrom(record: { requestedAt: string; approvalId: string }): string {
  return Buffer.from(orderKey(record)).toString('base64url');
}

const CURSOR = /^\d{4}-\d\d-\d\dT[\d:.]+Z\|[0-9a-f]{20}-[0-9a-f]{12}$/;

function cursorOf(cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined;
  const key = Buffer.from(cursor, 'base64url').toString();
  if (!CURSOR.test(key))
    throw new BadRequestError('invalid $pending request: cursor is not one a $pending reply gave', {
      details: { violations: [{ path: '/cursor', message: 'is not a nextCursor of $pending' }] },
    });
  return key;
}
