/**
 * The approval gate (PROTOCOL 6.1 step 3, section 8), as the dispatcher and the task runner
 * call it: asks `system.approvals.$decide`; on `pending`, waits for a person's decision until
 * the caller's deadline or the approval's expiry, whichever comes first. It fails closed: no
 * approver, no answer in time, a malformed answer or a reject all mean no, and an approval
 * nobody answered in time is removed.
 *
 * The wait hears `system.approvals.events.decided` (one subscription per connection, shared by
 * every waiting call) and reads the approval from the KV bucket: at once, on each event for it,
 * and every few seconds besides, so an event missed (a reconnect, a restart of the approvals
 * mount) delays a decision and never loses it. An approval lets exactly one call through: the
 * gate consumes it (compare-and-set) before the call goes ahead.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import type { BusClient } from '../bus/client.js';
import type { CallContext } from '../bus/context.js';
import {
  MatrixError,
  NoRespondersError,
  TimeoutError,
  UnavailableError,
  UnsendableRequestError,
} from '../bus/errors.js';
import { subscribeEvents } from '../bus/events.js';
import { Mounts } from '../bus/subjects.js';
import { countApproval } from '../telemetry/calls.js';
import { ApprovalStore, type Revisioned } from './store.js';
import {
  type ApprovalDecision,
  type ApprovalEvent,
  type ApprovalRequest,
  ApprovalStatus,
  DECIDE_OP,
  DECIDED_EVENTS,
  DEFAULT_APPROVALS_BUCKET,
  type Verdict,
} from './types.js';

export { DECIDE_OP, type Verdict } from './types.js';

/** How long `$decide` itself may take to answer, in ms (at once, or with a pending approval). */
const DECIDE_TIMEOUT_MS = 10_000;
/**
 * First and longest pause between reads of a waiting approval, in ms (events usually come first).
 */
const FIRST_POLL_MS = 1_000;
const LONGEST_POLL_MS = 15_000;

/** How a gate waits. */
export interface GateOptions {
  /** Unix ms: no wait goes past it (the caller's deadline, a task's expiry). */
  deadlineMs: number;
  /**
   * Stops waiting when aborted: the approval is removed, unless the reason is a `ServiceStopping`
   * or a `TakenOver`.
   */
  signal?: AbortSignal;
  /**
   * Awaited before an approval is used: false leaves it unused, for another call to use (a task
   * whose lease another instance holds now). Default: always use it.
   */
  beforeConsume?: () => Promise<boolean>;
  /** Told once the approval is pending (a task becomes `input_required`). */
  onPending?: (pending: { approvalId: string; expiresAt: string }) => void;
  /** The KV bucket of pending approvals; default `matrix-approvals`. */
  bucket?: string;
  /**
   * How long the wait was given, in ms, as the caller set it (a timeout says so in these words);
   * default: what is left until `deadlineMs` when asking.
   */
  windowMs?: number;
}

/**
 * The abort reason of a wait the service stops: its approval stays pending, for the call
 * sent again.
 */
export class ServiceStopping extends Error {
  constructor() {
    super('the service is stopping');
    this.name = 'ServiceStopping';
  }
}

/**
 * The abort reason of a task's wait that another instance took over: its approval stays, for
 * the new holder's call.
 */
export class TakenOver extends Error {
  constructor() {
    super('another instance took the task over');
    this.name = 'TakenOver';
  }
}

/** Asks for a decision, and waits for a person's when the policy says ask. Never throws. */
export async function approvalGate(
  client: BusClient,
  request: ApprovalRequest,
  ctx: CallContext,
  options: GateOptions,
): Promise<Verdict> {
  const verdict = await decide(client, request, ctx, options);
  countApproval(verdict.approved);
  return verdict;
}

async function decide(
  client: BusClient,
  request: ApprovalRequest,
  ctx: CallContext,
  options: GateOptions,
): Promise<Verdict> {
  if (options.signal?.aborted) return { approved: false, reason: 'it was cancelled' };
  let reply: unknown;
  const question: ApprovalRequest = { ...request, deadline: options.deadlineMs };
  const timeoutMs = Math.max(1, Math.min(DECIDE_TIMEOUT_MS, options.deadlineMs - Date.now()));
  try {
    reply = await client.request(Mounts.Approvals, DECIDE_OP, question, { ...ctx, timeoutMs });
  } catch (err) {
    return { approved: false, reason: notAsked(err, Math.min(DECIDE_TIMEOUT_MS, options.windowMs ?? timeoutMs)) };
  }
  const decision = reply as Partial<Record<string, unknown>> | undefined;
  if (decision?.decision === 'approve')
    return typeof decision.by === 'string' ? { approved: true, by: decision.by } : { approved: true };
  if (decision?.decision === 'reject') return rejected(decision as { by?: unknown; reason?: unknown });
  if (decision?.decision === 'pending' && typeof decision.approvalId === 'string') {
    const pending = decision as Extract<ApprovalDecision, { decision: 'pending' }>;
    options.onPending?.({ approvalId: pending.approvalId, expiresAt: pending.expiresAt });
    const expires = Date.parse(pending.expiresAt);
    const deadlineMs = Number.isNaN(expires) ? options.deadlineMs : Math.min(options.deadlineMs, expires);
    return waitFor(client.nc, pending.approvalId, { ...options, deadlineMs });
  }
  return { approved: false, reason: 'the approver gave no valid decision' };
}

/**
 * The wait alone, for an approval already pending (a task another instance took over): the
 * verdict once a person decides, a reject when nobody did by `deadlineMs`. Never throws.
 */
export async function awaitDecision(
  client: BusClient,
  approvalId: string,
  options: Omit<GateOptions, 'onPending'>,
): Promise<Verdict> {
  const verdict = await waitFor(client.nc, approvalId, options);
  countApproval(verdict.approved);
  return verdict;
}

async function waitFor(
  nc: NatsConnection,
  approvalId: string,
  options: Omit<GateOptions, 'onPending'>,
): Promise<Verdict> {
  const started = performance.now();
  const waited = () => Math.round(performance.now() - started);
  let store: ApprovalStore;
  try {
    store = await storeOf(nc, options.bucket ?? DEFAULT_APPROVALS_BUCKET);
  } catch (err) {
    return {
      approved: false,
      approvalId,
      reason: `its pending approval could not be read (${(err as Error).message})`,
    };
  }
  const wake = new Wake();
  const stopHearing = decidedEvents(nc).on(approvalId, () => wake.now());
  const onAbort = () => wake.now();
  options.signal?.addEventListener('abort', onAbort);
  try {
    let pause = FIRST_POLL_MS;
    for (;;) {
      let found: Revisioned | undefined;
      try {
        found = await store.get(approvalId);
      } catch {
        found = undefined; // JetStream away for a moment: read again at the next wake
        if (Date.now() < options.deadlineMs && !options.signal?.aborted) {
          await wake.after(Math.min(pause, options.deadlineMs - Date.now()));
          continue;
        }
      }
      const verdict = found === undefined ? gone(approvalId) : await settled(store, found, options.beforeConsume);
      if (verdict !== undefined) return withWait(verdict, waited());
      if (options.signal?.aborted) return withWait(await stopped(store, found, options.signal.reason), waited());
      const left = options.deadlineMs - Date.now();
      if (left <= 0) return withWait(await expired(store, found as Revisioned, options.beforeConsume), waited());
      await wake.after(Math.min(pause, left));
      pause = Math.min(pause * 2, LONGEST_POLL_MS);
    }
  } finally {
    stopHearing();
    options.signal?.removeEventListener('abort', onAbort);
    wake.clear();
  }
}

/** The verdict of an approval that was answered, or undefined while it is pending. */
async function settled(
  store: ApprovalStore,
  found: Revisioned,
  beforeConsume?: () => Promise<boolean>,
): Promise<Verdict | undefined> {
  const { record } = found;
  switch (record.status) {
    case ApprovalStatus.Pending:
      return undefined;
    case ApprovalStatus.Approved:
      if (beforeConsume !== undefined && !(await beforeConsume().catch(() => false)))
        return { approved: false, approvalId: record.approvalId, reason: 'another instance runs the call now' };
      if (await store.consume(found)) {
        const verdict: Verdict = { approved: true, approvalId: record.approvalId };
        if (record.by !== undefined) verdict.by = record.by;
        return verdict;
      }
      return used(record.approvalId);
    case ApprovalStatus.Rejected:
      return { ...rejected(record), approvalId: record.approvalId };
    default:
      return used(record.approvalId);
  }
}

/**
 * Nobody answered by the deadline: the approval is removed (unless it was answered at the
 * last moment).
 */
async function expired(
  store: ApprovalStore,
  found: Revisioned,
  beforeConsume?: () => Promise<boolean>,
): Promise<Verdict> {
  const removed = await store.remove(found).catch(() => false);
  if (!removed) {
    const now = await store.get(found.record.approvalId).catch(() => undefined);
    const verdict = now === undefined ? undefined : await settled(store, now, beforeConsume);
    if (verdict !== undefined) return verdict;
  }
  return {
    approved: false,
    approvalId: found.record.approvalId,
    reason: `nobody answered its approval ${found.record.approvalId} in time`,
  };
}

/**
 * The wait was aborted: the approval is withdrawn, or kept for the call sent again when the
 * service stops.
 */
async function stopped(store: ApprovalStore, found: Revisioned | undefined, reason: unknown): Promise<Verdict> {
  const approvalId = found?.record.approvalId;
  if (reason instanceof TakenOver)
    return { approved: false, ...(approvalId === undefined ? {} : { approvalId }), reason: reason.message };
  if (reason instanceof ServiceStopping)
    return {
      approved: false,
      ...(approvalId === undefined ? {} : { approvalId }),
      reason: `the service stopped while its approval ${approvalId} was pending; send the same call (same id) again to go on waiting for it`,
    };
  if (found !== undefined) await store.remove(found).catch(() => false);
  return {
    approved: false,
    ...(approvalId === undefined ? {} : { approvalId }),
    reason: 'its wait for approval was cancelled',
  };
}

function gone(approvalId: string): Verdict {
  return { approved: false, approvalId, reason: `its approval ${approvalId} expired or was withdrawn` };
}

function used(approvalId: string): Verdict {
  return { approved: false, approvalId, reason: `its approval ${approvalId} was already used by another call` };
}

function rejected(decision: { by?: unknown; reason?: unknown }): Verdict {
  const by = typeof decision.by === 'string' ? decision.by : undefined;
  const reason = typeof decision.reason === 'string' && decision.reason ? `: ${decision.reason}` : '';
  const verdict: Verdict = { approved: false, reason: `it was rejected${by ? ` by ${by}` : ''}${reason}` };
  if (by !== undefined) verdict.by = by;
  return verdict;
}

function withWait(verdict: Verdict, waitedMs: number): Verdict {
  verdict.waitedMs = waitedMs;
  return verdict;
}

/**
 * Why no decision came, in words that blame the right party: the request, nobody, the clock, or
 * the approver.
 */
function notAsked(err: unknown, timeoutMs: number): string {
  if (err instanceof UnsendableRequestError) return `its approval request could not be sent (${err.message})`;
  if (err instanceof NoRespondersError) return 'no approver is running to decide on it';
  if (err instanceof TimeoutError) return `no approver decided within ${timeoutMs} ms`;
  if (err instanceof UnavailableError) return `the approver is unavailable: ${err.message}`;
  return `the approver failed: ${err instanceof MatrixError ? err.message : 'unexpectedly'}`;
}

/** A sleep that an event or an abort ends early. */
class Wake {
  private timer: NodeJS.Timeout | undefined;
  private resolve: (() => void) | undefined;
  private early = false;

  after(ms: number): Promise<void> {
    if (this.early) {
      this.early = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.resolve = resolve;
      this.timer = setTimeout(() => this.now(), Math.max(0, ms));
    });
  }

  now(): void {
    const resolve = this.resolve;
    if (resolve === undefined) {
      this.early = true;
      return;
    }
    this.clear();
    resolve();
  }

  clear(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.resolve = undefined;
  }
}

/**
 * Withdraws the approval `approvalId` of `bucket` while nothing has used it (pending, or approved
 * and not yet used): the call it was for will not be made. False when it is unknown, used,
 * rejected, or changed meanwhile.
 */
export async function withdrawApproval(nc: NatsConnection, bucket: string, approvalId: string): Promise<boolean> {
  const store = await storeOf(nc, bucket);
  const found = await store.get(approvalId);
  const status = found?.record.status;
  if (found === undefined || (status !== ApprovalStatus.Pending && status !== ApprovalStatus.Approved)) return false;
  return store.remove(found);
}

/**
 * The stores bound per connection and bucket; a failed bind is forgotten, so the next wait
 * tries again.
 */
const stores = new WeakMap<NatsConnection, Map<string, Promise<ApprovalStore>>>();

function storeOf(nc: NatsConnection, bucket: string): Promise<ApprovalStore> {
  let byBucket = stores.get(nc);
  if (byBucket === undefined) stores.set(nc, (byBucket = new Map()));
  let store = byBucket.get(bucket);
  if (store === undefined) {
    store = ApprovalStore.bind(nc, bucket);
    byBucket.set(bucket, store);
    store.catch(() => byBucket.delete(bucket));
  }
  return store;
}

/** One subscription to `.decided` per connection, told to the waits by approval id. */
class DecidedEvents {
  private readonly listeners = new Map<string, Set<() => void>>();
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly nc: NatsConnection) {}

  on(approvalId: string, listener: () => void): () => void {
    this.unsubscribe ??= subscribeEvents<ApprovalEvent>(this.nc, DECIDED_EVENTS, (event) => {
      if (typeof event?.approvalId !== 'string') return;
      for (const heard of this.listeners.get(event.approvalId) ?? []) heard();
    });
    let set = this.listeners.get(approvalId);
    if (set === undefined) this.listeners.set(approvalId, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(approvalId);
      if (this.listeners.size === 0) {
        this.unsubscribe?.();
        this.unsubscribe = undefined;
      }
    };
  }
}

const decided = new WeakMap<NatsConnection, DecidedEvents>();

function decidedEvents(nc: NatsConnection): DecidedEvents {
  let events = decided.get(nc);
  if (events === undefined) decided.set(nc, (events = new DecidedEvents(nc)));
  return events;
}
