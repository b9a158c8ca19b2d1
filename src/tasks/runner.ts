/**
 * Runs tasks (PROTOCOL 9) and keeps them durable. The instance that runs a task holds a lease
 * on it and renews it; every instance watches the bucket, so it hears of a `$cancel` made on
 * another, wakes `$result` waiters, and takes over a task whose lease ran out: one that was not
 * sent yet is run (a pending approval waited for again), one that was sent is `failed` "may have
 * run" unless its tool is idempotent (then it is sent again). Every change is compare-and-set,
 * and a terminal task never changes again, so no task reaches its target twice otherwise. An
 * instance that hears another has claimed a task it runs stops it, keeping its approval for the
 * new holder, and renews its lease before it uses an approval: an approval goes to the call the
 * lease holder sends.
 *
 * What a principal keeps is bounded (records and bytes, finished tasks included), and a finished
 * task keeps no arguments, session or grant: one caller cannot fill the bucket or the memory of
 * every instance.
 */

import { TakenOver } from '../approvals/gate.js';
import { sha256Hex } from '../bus/codec.js';
import type { CallContext, Progress } from '../bus/context.js';
import { type Logger, silentLogger } from '../bus/log.js';
import type { CallHooks, PendingApproval } from '../dispatcher/call-hooks.js';
import type { Dispatcher } from '../dispatcher/dispatcher.js';
import { type CallFailure, errorResult, failure } from '../dispatcher/results.js';
import type { Route } from '../dispatcher/route.js';
import { capContent, escapedBytes } from '../dispatcher/shape.js';
import type { ToolCall, ToolResult } from '../dispatcher/types.js';
import type { GrantError } from '../identity/errors.js';
import type { IdentityGate } from '../identity/gate.js';
import type { Revocations } from '../identity/revocations.js';
import type { ResolveRequest } from '../registry/types.js';
import { KnownTasks } from './known.js';
import { LiveSlots } from './slots.js';
import { encodeTask, newTaskId, type StoredTask, type TaskStore, taskKey } from './store.js';
import {
  DEFAULT_TASK_TTL_MS,
  isTerminal,
  MAX_FINISHED_TASK_BYTES,
  MAX_LIVE_TASKS_PER_PRINCIPAL,
  MAX_TASK_BYTES_PER_PRINCIPAL,
  MAX_TASK_RECORDS_PER_PRINCIPAL,
  MAX_TASK_TTL_MS,
  POLL_INTERVAL_MS,
  type Task,
  TaskPhase,
  type TaskRecord,
  type TaskRequest,
  TaskStatus,
} from './types.js';

/** How a runner behaves; every field has a default. */
export interface TaskRunnerOptions {
  /** This instance's name in leases; default a random one. */
  instance?: string;
  /** How long a lease holds unless renewed, in ms; default 5000. */
  leaseMs?: number;
  /**
   * How often leases are renewed and progress written, in ms; default 1000 (at most one write a
   * second per task).
   */
  tickMs?: number;
  /** How often the sweeper looks for expired tasks and lapsed leases, in ms; default 1000. */
  sweepMs?: number;
  /** Live tasks one principal may hold; default `MAX_LIVE_TASKS_PER_PRINCIPAL` (32). */
  maxLivePerPrincipal?: number;
  /** Task records (finished ones included) one principal may keep; default `MAX_TASK_RECORDS_PER_PRINCIPAL` (256). */
  maxRecordsPerPrincipal?: number;
  /** Bytes of task records (finished ones included) one principal may keep; default `MAX_TASK_BYTES_PER_PRINCIPAL` (8 MiB). */
  maxBytesPerPrincipal?: number;
  /**
   * Checks the grant a task was made under again when it runs (a takeover too) and right before
   * its request is sent: revoked or expired, the task fails and nothing is sent. Default none
   * (trusting callers: there are no grants).
   */
  identity?: IdentityGate;
  /**
   * Revocations to hear: each one cancels the live tasks whose grant it names, and so withdraws
   * their pending approvals. Default none.
   */
  revocations?: Revocations;
  logger?: Logger;
}

/** A task this instance runs. */
interface Running {
  controller: AbortController;
  /** The latest progress report, and whether it is written yet. */
  progress: Progress | undefined;
  progressDirty: boolean;
}

/** Runs tasks on one instance; share one per process. */
export class TaskRunner {
  readonly instance: string;
  private readonly leaseMs: number;
  private readonly maxLive: number;
  /** What one principal's records may keep. */
  private readonly share: { records: number; bytes: number };
  private readonly logger: Logger;
  /** Every task this instance knows of from the watch (terminal ones too, until removed). */
  private readonly known = new KnownTasks();
  /** The principals' live-task slots: the bound on live tasks across instances. */
  private readonly slots: LiveSlots;
  private readonly running = new Map<string, Running>();
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly timers: NodeJS.Timeout[] = [];
  private stopWatch: (() => void) | undefined;
  private closing = false;
  /** The service is stopping: `$result` waits end at once, so its mount drains without them. */
  private waking = false;

  constructor(
    private readonly dispatcher: Dispatcher,
    readonly store: TaskStore,
    private readonly options: TaskRunnerOptions = {},
  ) {
    this.instance = options.instance ?? newTaskId();
    this.leaseMs = options.leaseMs ?? 5_000;
    this.maxLive = options.maxLivePerPrincipal ?? MAX_LIVE_TASKS_PER_PRINCIPAL;
    this.share = {
      records: options.maxRecordsPerPrincipal ?? MAX_TASK_RECORDS_PER_PRINCIPAL,
      bytes: options.maxBytesPerPrincipal ?? MAX_TASK_BYTES_PER_PRINCIPAL,
    };
    this.logger = options.logger ?? silentLogger;
    this.slots = new LiveSlots(store.bucket, this.maxLive, 2 * this.leaseMs);
  }

  /** Watches the bucket and starts the lease renewals and the sweeper. */
  start(): this {
    const watch = this.store.watch(
      (key, record, revision, bytes) => this.heard(key, record, revision, bytes),
      (entry) => this.slots.heard(entry),
    );
    const stopHearing = this.options.revocations?.onRevoked(
      () => void this.cancelRevoked().catch((err: unknown) => this.failed('cancel on revocation', err)),
    );
    this.stopWatch = () => {
      watch.stop();
      stopHearing?.();
    };
    const every = (ms: number, work: () => Promise<void>) => {
      const timer = setInterval(() => void work().catch((err: unknown) => this.failed('task upkeep', err)), ms);
      timer.unref();
      this.timers.push(timer);
    };
    every(this.options.tickMs ?? 1_000, () => this.renew());
    every(this.options.sweepMs ?? 1_000, () => this.sweep());
    return this;
  }

  /** Ends every `$result` wait now and each one asked from now on (the service is stopping). */
  stopWaiting(): void {
    this.waking = true;
    for (const wake of [...this.waiters.values()].flatMap((set) => [...set])) wake();
  }

  /**
   * Stops watching and renewing; tasks running here are left to the lease (another instance takes
   * them over).
   */
  close(): void {
    this.closing = true;
    this.stopWatch?.();
    for (const timer of this.timers) clearInterval(timer);
    for (const wake of this.waiters.values()) for (const w of wake) w();
  }

  /**
   * Makes a task of a checked call and starts it here; resolves with the task once stored, or
   * with the error result of a refusal: the principal holds too many live tasks, or its share of
   * the bucket (records, bytes) is full, or the bucket is. The task takes one of its principal's
   * live-task slots first: the bound on live tasks holds across instances.
   */
  async create(
    session: ResolveRequest,
    call: ToolCall,
    context: CallContext,
    to: Route,
    request: TaskRequest,
  ): Promise<Task | ToolResult> {
    const record = this.newRecord(session, call, context, to, request);
    const key = taskKey(record.owner, record.task.taskId);
    const value = encodeTask(record);
    const bytes = key.length + value.length;
    const refused = this.refusal(record, bytes);
    if (refused !== undefined) return errorResult(call.id, call.name, refused);
    // Reserved before the first await: the next call's check counts this one.
    const release = this.known.reserve(record.owner.principal, bytes);
    try {
      const slot = await this.slots.take(record.owner.principal, key, record.expiresAt - Date.now());
      if (slot === undefined)
        return errorResult(
          call.id,
          call.name,
          failure.tooManyTasks(call.name, this.slots.heldBy(record.owner.principal)),
        );
      const stored = await this.store.create(key, record, value).catch(async (err: unknown) => {
        await this.slots.free(slot).catch((e: unknown) => this.failed('free a task slot', e));
        throw err;
      });
      this.known.remember(stored);
      this.run(stored);
      return record.task;
    } finally {
      release();
    }
  }

  /**
   * Why a new task of `bytes` may not be kept, or undefined when it may. Each live task, this one
   * included, counts room for its finished record too (`MAX_FINISHED_TASK_BYTES`): a record grows
   * when its result comes, after this check, so the share must hold what the live ones may become.
   */
  private refusal(record: TaskRecord, bytes: number): CallFailure | undefined {
    const tool = record.call.name;
    const kept = this.known.keptBy(record.owner.principal);
    // Live tasks are counted by their slots (those being taken here included): across instances.
    const live = this.slots.heldBy(record.owner.principal);
    if (live >= this.maxLive) return failure.tooManyTasks(tool, live);
    const most = this.share.bytes - MAX_FINISHED_TASK_BYTES;
    if (bytes > most) return failure.taskTooLarge(tool, bytes, Math.max(0, most));
    // Each live task, this one included, keeps room for its finished record.
    const growth = (live + 1) * MAX_FINISHED_TASK_BYTES;
    if (kept.records + 1 > this.share.records || kept.bytes + bytes + growth > this.share.bytes)
      return failure.taskShareFull(tool, kept, this.share);
    // Room is left in the bucket for the tasks already there to end.
    if (this.known.totalBytes() + bytes > (this.store.maxBytes / 8) * 7) return failure.tasksFull(tool);
    return undefined;
  }

  /** The record of a new task, its lease held here. */
  private newRecord(
    session: ResolveRequest,
    call: ToolCall,
    context: CallContext,
    to: Route,
    request: TaskRequest,
  ): TaskRecord {
    const now = Date.now();
    const ttlMs = Math.min(request.ttlMs ?? DEFAULT_TASK_TTL_MS, MAX_TASK_TTL_MS);
    const taskId = newTaskId();
    const at = new Date(now).toISOString();
    return {
      task: {
        taskId,
        callId: call.id,
        name: call.name,
        status: TaskStatus.Working,
        createdAt: at,
        lastUpdatedAt: at,
        ttlMs,
        pollIntervalMs: POLL_INTERVAL_MS,
      },
      owner: { principal: context.principal, session: context.session },
      session,
      call,
      argumentsDigest: sha256Hex(JSON.stringify(call.arguments ?? {})),
      context: {
        traceparent: context.traceparent,
        principal: context.principal,
        session: context.session,
        grant: context.grant,
        readSessions: context.readSessions,
      },
      phase: TaskPhase.Queued,
      idempotent: to.idempotent,
      expiresAt: now + ttlMs,
      lease: { holder: this.instance, until: now + this.leaseMs },
    };
  }

  /** The task `taskId` of `owner`, or undefined (unknown, or someone else's). */
  async get(owner: TaskRecord['owner'], taskId: string): Promise<StoredTask | undefined> {
    return this.store.get(taskKey(owner, taskId));
  }

  /** The tasks of `owner` this instance knows of (from the watch), in no order. */
  tasksOf(owner: TaskRecord['owner']): StoredTask[] {
    return this.known.ofOwner(owner);
  }

  /**
   * Cancels a task unless it is terminal already (`why` says why, default: its caller asked);
   * resolves with it as stored after.
   */
  async cancel(stored: StoredTask, why?: CallFailure): Promise<StoredTask | undefined> {
    const after = await this.store.transition(
      stored.key,
      (r) => {
        if (isTerminal(r.task.status)) return undefined;
        const sent = r.phase === TaskPhase.Sent;
        const failed = why ?? failure.cancelled(r.call.name, sent);
        return finished(r, errorResult(r.call.id, r.call.name, failed), 'cancelled');
      },
      stored,
    );
    if (after !== undefined) this.heard(after.key, after.record, after.revision, after.bytes);
    return after;
  }

  /** Resolves once the task at `key` is terminal, or after `waitMs`; false when the service stops waiting. */
  async waitForEnd(key: string, waitMs: number): Promise<boolean> {
    if (waitMs <= 0 || this.closing || this.waking) return false;
    await new Promise<void>((resolve) => {
      let set = this.waiters.get(key);
      if (set === undefined) this.waiters.set(key, (set = new Set()));
      const waiters = set;
      const wake = () => {
        clearTimeout(timer);
        waiters.delete(wake);
        if (waiters.size === 0) this.waiters.delete(key);
        resolve();
      };
      const timer = setTimeout(wake, waitMs);
      waiters.add(wake);
    });
    return !this.closing && !this.waking;
  }

  /** Live tasks of a principal this instance knows of, those being written here included. */
  liveOf(principal: string | undefined): number {
    return this.known.keptBy(principal).live;
  }

  /**
   * Why the grant a task was made under no longer holds (revoked, expired), or undefined while
   * it does (or there are no grants to check).
   */
  private lapsed(r: TaskRecord): GrantError | undefined {
    return this.options.identity?.lapsed(r.context.grant);
  }

  /** A revocation came: cancels the live tasks whose grant it names, and their approvals. */
  private async cancelRevoked(): Promise<void> {
    const cancels: Promise<unknown>[] = [];
    for (const stored of this.known.values()) {
      if (isTerminal(stored.record.task.status)) continue;
      const lapsed = this.lapsed(stored.record);
      if (lapsed !== undefined) cancels.push(this.cancelLapsed(stored, lapsed));
    }
    await Promise.all(cancels);
  }

  /**
   * Cancels a task whose grant was revoked and withdraws its approval, whether or not an
   * instance still waits for it (one that died leaves it pending otherwise).
   */
  private async cancelLapsed(stored: StoredTask, lapsed: GrantError): Promise<void> {
    const approvalId = stored.record.approvalId;
    await this.cancel(stored, failure.grantLapsed(stored.record.call.name, lapsed.message));
    if (approvalId !== undefined) await this.dispatcher.withdrawApproval(approvalId);
  }

  /** Runs a task here (this instance holds its lease), unless its grant no longer holds. */
  private run(stored: StoredTask): void {
    const key = stored.key;
    const r = stored.record;
    const session = r.session;
    const lapsed = this.lapsed(r);
    if (lapsed !== undefined || session === undefined) {
      const stop =
        lapsed !== undefined
          ? failure.grantLapsed(r.call.name, lapsed.message)
          : failure.unexpected(r.call.name, new Error('the task record holds no session to run it with'));
      const result = errorResult(r.call.id, r.call.name, stop);
      void this.end(key, result).catch((err: unknown) => this.failed('task end', err));
      return;
    }
    const state: Running = { controller: new AbortController(), progress: undefined, progressDirty: false };
    this.running.set(key, state);
    const hooks: CallHooks = {
      asTask: true,
      signal: state.controller.signal,
      approvalTimeoutMs: Math.max(1_000, r.expiresAt - Date.now()),
      onProgress: (progress) => {
        state.progress = progress;
        state.progressDirty = true;
      },
      // Only the latest report of a tick is written: the others are counted, never decoded.
      progressEveryMs: this.options.tickMs ?? 1_000,
      onPending: (pending) =>
        void this.pending(key, pending).catch((err: unknown) => this.failed('input_required', err)),
      beforeSend: (callId) => this.sending(key, callId, r),
      beforeConsume: () => this.holding(key),
    };
    if (r.approvalId !== undefined) hooks.approvalId = r.approvalId;
    const ctx: CallContext = {
      traceparent: r.context.traceparent,
      principal: r.context.principal,
      session: r.context.session,
      grant: r.context.grant,
      readSessions: r.context.readSessions,
    };
    void this.dispatcher
      .call(session, r.call, ctx, hooks)
      .catch((err: unknown) => errorResult(r.call.id, r.call.name, failure.unexpected(r.call.name, err)))
      .then((result) => this.end(key, result))
      .catch((err: unknown) => this.failed('task end', err))
      .finally(() => this.running.delete(key));
  }

  /**
   * The approval is pending: `input_required`, naming its id (kept, so a takeover waits for the
   * same one).
   */
  private async pending(key: string, pending: PendingApproval): Promise<void> {
    await this.store.transition(key, (r) => {
      if (isTerminal(r.task.status)) return undefined;
      const next = touched(r);
      next.task.status = TaskStatus.InputRequired;
      next.task.statusMessage = `waiting for approval ${pending.approvalId}${pending.expiresAt === undefined ? '' : ` (expires ${pending.expiresAt})`}`;
      next.approvalId = pending.approvalId;
      return next;
    });
  }

  /**
   * Renews the lease, compare-and-set, right before an approval is used: true while this
   * instance still holds the task, so no other can claim it before the call is marked sent.
   */
  private async holding(key: string): Promise<boolean> {
    const mine = (r: TaskRecord) => !isTerminal(r.task.status) && r.lease.holder === this.instance;
    const after = await this.store.transition(key, (r) => {
      if (!mine(r)) return undefined;
      const next = touched(r);
      next.lease = { holder: this.instance, until: Date.now() + this.leaseMs };
      return next;
    });
    return after !== undefined && mine(after.record);
  }

  /**
   * Marks the task sent, compare-and-set, just before its request goes out; a terminal task is
   * not sent.
   */
  private async sending(key: string, callId: string, record: TaskRecord): Promise<void> {
    const lapsed = this.lapsed(record);
    if (lapsed !== undefined) throw failure.grantLapsed(record.call.name, lapsed.message);
    let stopped: TaskRecord | undefined;
    await this.store.transition(key, (r) => {
      stopped = undefined;
      if (isTerminal(r.task.status) || r.lease.holder !== this.instance) {
        stopped = r;
        return undefined;
      }
      const next = touched(r);
      next.task.status = TaskStatus.Working;
      next.task.statusMessage = undefined;
      next.phase = TaskPhase.Sent;
      next.targetCallId = callId;
      next.approvalId = undefined;
      return next;
    });
    if (stopped !== undefined) throw failure.cancelled(stopped.call.name, false);
  }

  /**
   * Writes the result, unless the task is terminal already (cancelled meanwhile) or this instance
   * is closing.
   */
  private async end(key: string, result: ToolResult): Promise<void> {
    if (this.closing) return;
    const status = result.isError ? (result.error?.code === 'cancelled' ? 'cancelled' : 'failed') : 'completed';
    const ending = (ended: ToolResult, as: typeof status) =>
      this.store.transition(key, (r) =>
        isTerminal(r.task.status) || r.lease.holder !== this.instance ? undefined : finished(r, ended, as),
      );
    let after: StoredTask | undefined;
    try {
      after = await ending(result, status);
    } catch (err) {
      // The result could not be written: a small record says so, rather than the lease lapsing
      // into a takeover's false "may have run" (or a lost answer).
      if (this.closing) return;
      this.failed('task result write', err);
      const sent = this.known.get(key)?.record.phase === TaskPhase.Sent;
      after = await ending(
        errorResult(result.callId, result.name, failure.resultNotKept(result.name, sent, err)),
        'failed',
      );
    }
    if (after !== undefined) this.heard(after.key, after.record, after.revision, after.bytes);
  }

  /**
   * Renews the leases of the tasks running here, with their latest progress: one write a tick per
   * task at most.
   */
  private async renew(): Promise<void> {
    const now = Date.now();
    const writes: Promise<unknown>[] = [];
    for (const [key, state] of this.running) {
      const known = this.known.get(key);
      const leaseDue = known === undefined || known.record.lease.until - now < this.leaseMs / 2;
      if (!leaseDue && !state.progressDirty) continue;
      const progress = state.progress;
      state.progressDirty = false;
      writes.push(
        this.store.transition(key, (r) => {
          if (isTerminal(r.task.status) || r.lease.holder !== this.instance) return undefined;
          const next = touched(r);
          next.lease = { holder: this.instance, until: Date.now() + this.leaseMs };
          if (progress !== undefined) next.task.progress = progress;
          return next;
        }),
      );
    }
    await Promise.all(writes);
  }

  /**
   * Removes tasks past their `expiresAt`; takes over live ones whose lease ran out; frees the
   * slots of tasks that ended or are gone when the instance that should have freed them did not.
   */
  private async sweep(): Promise<void> {
    const now = Date.now();
    for (const stored of [...this.known.values()]) {
      const r = stored.record;
      if (r.expiresAt <= now) await this.store.remove(stored.key, stored.revision);
      else if (!isTerminal(r.task.status) && r.lease.until <= now && !this.running.has(stored.key))
        await this.takeOver(stored);
    }
    await this.slots.sweep(
      (key) => {
        const known = this.known.get(key);
        return known === undefined ? 'unknown' : isTerminal(known.record.task.status) ? 'ended' : 'live';
      },
      async (key) => {
        const stored = await this.store.get(key);
        return stored === undefined || isTerminal(stored.record.task.status) ? 'ended' : 'live';
      },
    );
  }

  /**
   * Claims a task whose lease lapsed (compare-and-set: one instance wins), then runs it or
   * fails it.
   */
  private async takeOver(stored: StoredTask): Promise<void> {
    let claimed = false;
    const after = await this.store.transition(
      stored.key,
      (r) => {
        claimed = false;
        if (isTerminal(r.task.status) || r.lease.until > Date.now()) return undefined;
        claimed = true;
        const next = touched(r);
        next.lease = { holder: this.instance, until: Date.now() + this.leaseMs };
        return next;
      },
      stored,
    );
    if (!claimed || after === undefined) return;
    this.logger.info('took over a task whose instance stopped', {
      task: after.record.task.taskId,
      phase: after.record.phase,
    });
    const r = after.record;
    if (r.phase === TaskPhase.Sent && !r.idempotent) {
      const result = errorResult(r.call.id, r.call.name, failure.mayHaveRun(r.call.name));
      const ended = await this.store.transition(
        after.key,
        (x) => (isTerminal(x.task.status) ? undefined : finished(x, result, 'failed')),
        after,
      );
      if (ended !== undefined) this.heard(ended.key, ended.record, ended.revision, ended.bytes);
      return;
    }
    this.known.remember(after);
    this.run(after);
  }

  /**
   * A change of the bucket: remembered; a task ended elsewhere stops here and wakes its waiters;
   * one another instance claimed stops here, its approval kept for the new holder.
   */
  private heard(key: string, record: TaskRecord | undefined, revision: number, bytes: number): void {
    const before = this.known.get(key);
    if (before !== undefined && before.revision > revision) return;
    if (record === undefined) this.known.forget(key);
    else this.known.remember({ key, record, revision, bytes });
    if (record !== undefined && !isTerminal(record.task.status)) {
      if (record.lease.holder !== this.instance) this.running.get(key)?.controller.abort(new TakenOver());
      return;
    }
    this.running.get(key)?.controller.abort();
    // The lease holder frees the slot (one instance, not every one that hears the end).
    if (record !== undefined && record.lease.holder === this.instance)
      void this.slots.release(key).catch((err: unknown) => this.failed('free a task slot', err));
    const waiters = this.waiters.get(key);
    if (waiters !== undefined) for (const wake of [...waiters]) wake();
  }

  private failed(what: string, err: unknown): void {
    if (this.closing) return;
    this.logger.error(`${what} failed`, { error: err instanceof Error ? err.message : String(err) });
  }
}

/** A copy of the record to change, its `lastUpdatedAt` now. */
function touched(r: TaskRecord): TaskRecord {
  const next: TaskRecord = structuredClone(r);
  next.task.lastUpdatedAt = new Date().toISOString();
  return next;
}

/**
 * The record ended with `result` (capped as every result is): its arguments, session and grant
 * dropped, nothing after the end needs them (the arguments' digest stays). It is at most
 * `MAX_FINISHED_TASK_BYTES` as stored (`withinFinishedBound`).
 */
function finished(r: TaskRecord, result: ToolResult, status: 'completed' | 'failed' | 'cancelled'): TaskRecord {
  const next = touched(r);
  next.call = { id: r.call.id, name: r.call.name };
  next.session = undefined;
  next.context = { ...r.context, grant: undefined };
  next.task.status = status;
  next.task.statusMessage =
    status === 'completed' ? undefined : (result.error?.message ?? result.content).slice(0, 512);
  next.result = result;
  next.lease = { holder: r.lease.holder, until: 0 };
  return withinFinishedBound(next);
}

/**
 * A finished record within `MAX_FINISHED_TASK_BYTES` as stored, whatever its result holds (a
 * dispatcher with a larger cap, a `structured` of bytes, base64 a third larger): past it the
 * result's `structured` and the task's progress go, then the content is cut to what is left; the
 * content says what went.
 */
export function withinFinishedBound(next: TaskRecord): TaskRecord {
  const result = next.result;
  if (result === undefined || encodeTask(next).length <= MAX_FINISHED_TASK_BYTES) return next;
  const note = (what: string) => `\n…[${what} to fit the task's record of ${MAX_FINISHED_TASK_BYTES} bytes]`;
  const longest = note('its structured reply left out and its content cut');
  const cut: ToolResult = { ...result, structured: undefined, content: '' };
  if (cut.error !== undefined) cut.error = { ...cut.error, message: cut.error.message.slice(0, 512) };
  // Measured with the widest `truncated` there can be: the one set below is never longer.
  cut.truncated = { shown: Number.MAX_SAFE_INTEGER, total: Number.MAX_SAFE_INTEGER };
  next.result = cut;
  next.task.progress = undefined;
  const room = MAX_FINISHED_TASK_BYTES - encodeTask(next).length - escapedBytes(longest);
  const content = capContent(result.content, Math.max(0, room));
  const went = [
    ...(result.structured === undefined ? [] : ['its structured reply left out']),
    ...(content.truncated === undefined ? [] : ['its content cut']),
  ];
  cut.content = content.content + note(went.length === 0 ? 'its progress left out' : went.join(' and '));
  cut.truncated = content.truncated ?? result.truncated;
  return next;
}
