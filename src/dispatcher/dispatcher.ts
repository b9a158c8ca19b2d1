/**
 * The dispatcher (PROTOCOL 6.1): an LLM tool call in, a `ToolResult` out, through one pipeline
 * of named steps, none skipped:
 *
 *   member → readArguments → route → approve → forward → shape, then audit
 *
 * `member` (here) finds the tool in the session; `readArguments` (arguments.ts) parses, bounds and
 * validates; `route` (route.ts) says where the call goes, whether it is gated and whether it is
 * sent once; `approve` (here, with approvals/gate.ts) asks `system.approvals` and fails closed;
 * `forward` (here, with route.ts's in-flight bound and retry rule) sends the request under the
 * smallest deadline; `shape` (shape.ts) turns the reply into what the model reads; `audit`
 * records every call, its refusals and failures included. A step that fails the call throws
 * `CallFailure` (results.ts, where every error result and its message is written); the pipeline
 * turns it into the result.
 *
 * On the warm path (a cached session, no approval) nothing is awaited before the request is
 * published: the steps before `forward` are synchronous (but for the first calls of a tool with
 * a large schema, which wait for it to be compiled off the event loop).
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { ServiceStopping, withdrawApproval } from '../approvals/gate.js';
import { DEFAULT_APPROVALS_BUCKET } from '../approvals/types.js';
import { recordDefinitionChanges } from '../audit/definitions.js';
import { type CallEvent, newCallEvent } from '../audit/events.js';
import { AuditLog, isoNow, observeWithTelemetry } from '../audit/log.js';
import { RefusalAudit, type RefusalBudgetOptions } from '../audit/refusals.js';
import type { TrailShareOptions } from '../audit/share.js';
import { BusClient, newCallId, ReplyMode } from '../bus/client.js';
import { type CallContext, CancelledError } from '../bus/context.js';
import { ConnectionLostError, ErrorCode, MatrixError, TargetFloodError, TimeoutError } from '../bus/errors.js';
import { deadlineOf, newTraceparent } from '../bus/headers.js';
import { mountReplyPrefix, opSubject } from '../bus/subjects.js';
import type { IdentityGate } from '../identity/gate.js';
import { watchRegistry } from '../registry/events.js';
import type { ResolvedTool, ResolveRequest } from '../registry/types.js';
import { observeInFlight, telemetryRegistered } from '../telemetry/instruments.js';
import { ArgumentValidators, readArguments } from './arguments.js';
import { type CallHooks, cancelTarget, waitForApproval } from './call-hooks.js';
import { DEFAULT_REPLY_BUDGET, ReplyBudget } from './reply-budget.js';
import { CallFailure, errorResult, failure, targetFailed } from './results.js';
import { type Route, retryDelay, route, TargetSlots } from './route.js';
import {
  busToolSource,
  type Session,
  SessionCache,
  type SessionCacheOptions,
  type ToolSource,
} from './session-cache.js';
import { DEFAULT_CONTENT_CAP, DEFAULT_SUMMARY_BUDGET, isFailedToolReply, type Shaped, shapeReply } from './shape.js';
import type { ToolCall, ToolResult } from './types.js';

/** How a dispatcher behaves; every field has a default. */
export interface DispatcherOptions {
  /** Where sessions are resolved; default `system.tools` over the bus. */
  source?: ToolSource;
  /** Session cache tuning. */
  sessions?: SessionCacheOptions;
  /**
   * Longest wait for a person's approval when the caller sends no `Matrix-Deadline`, in ms;
   * default 60000. A caller's deadline bounds the wait instead, and the policy's `askTimeoutMs`
   * bounds it always.
   */
  approvalTimeoutMs?: number;
  /** KV bucket of pending approvals; default `matrix-approvals`. */
  approvalsBucket?: string;
  /** Most calls in flight per target mount; past it a call fails fast. Default 1024. */
  maxInFlightPerTarget?: number;
  /**
   * Most of a target's calls in flight one principal (a verified grant's subject) may hold. Default
   * a quarter of `maxInFlightPerTarget`.
   */
  maxInFlightPerPrincipal?: number;
  /**
   * Bytes of replies a target may have in flight at once (`reply-budget.ts`); past it a call
   * waits for replies to come back. Default 16 MiB; each principal a quarter of it.
   */
  replyBudget?: number;
  /** Cap of a result's `content`, in characters; default 65536. */
  contentCap?: number;
  /** Budget of `summary` results, in characters; default 2000. */
  summaryBudget?: number;
  /** Most requests per call when retrying is safe; default 3. */
  maxAttempts?: number;
  /** First retry backoff, in ms, doubling each time; default 5. */
  backoffMs?: number;
  /** Publish audit events; default true. */
  audit?: boolean;
  /** How many refusals without a valid grant are stored one by one (the rest are summarised). */
  refusals?: RefusalBudgetOptions;
  /** Each principal's share of the trail's bytes; past it its events go to the overflow stream. None: no share. */
  trailShare?: TrailShareOptions;
  /**
   * Tell each call to OpenTelemetry (its `execute_tool` span and the call metrics). Default: when
   * an SDK is registered as the dispatcher is made (OpenTelemetry's set-up registers it before
   * the code it observes); with none, a call runs no telemetry code. The observer is the
   * process's (`callObservers`): once one dispatcher turns it on, every call is told.
   */
  telemetry?: boolean;
  /**
   * The connection its calls to targets go on (requests, their replies and `$cancel`); default
   * the dispatcher's own. A connection of their own (what `serve` opens) keeps a target's flood
   * off the connection the registry, KV and approvals answer on: on its socket, behind its
   * buffer, and under nats-server's slow-consumer cut. Its inbox prefix should be
   * `mountReplyPrefix` of it (where mounts' users may answer).
   */
  targetsConnection?: NatsConnection;
  /**
   * The gate that admitted the calls (`system.dispatcher`'s): a call that waited for a person is
   * sent only if its grant still holds then; revoked or expired meanwhile, it is refused unsent.
   */
  identity?: IdentityGate;
}

/**
 * A call refused outside the pipeline (at the mount, for its grant, or as a task the service
 * would not start): why, and what is known of who sent it.
 */
export interface RefusedCall {
  /** The error code the caller got. */
  code: string;
  /** The check its grant failed (`details.grant`), when it was refused for its grant. */
  grantFailure?: string;
  /**
   * The principal and session of a valid grant (the body asked for other authority), or of a
   * caller the service trusts: its event counts against that principal's refusal budget.
   */
  principal?: string;
  session?: string;
  /**
   * The `sub` of a grant a trusted issuer signed that was refused all the same (expired, …): not
   * proof of the caller.
   */
  grantSubject?: string;
}

/**
 * One call on its way through the pipeline: the call, its context, and the audit event it fills in.
 */
interface CallRun {
  call: ToolCall;
  /** The caller's context, with a `traceparent` (a new one when the caller sent none). */
  context: CallContext;
  /** The audit event; every field exists from the start, so every event has one object shape. */
  event: CallEvent;
  /** `performance.now()` when the call came in. */
  started: number;
  /** Whether it got as far as an approver or its target (what it cost beyond this process). */
  reached: boolean;
  /** What its caller hears of it and may do to it; undefined on a plain call. */
  hooks: CallHooks | undefined;
}

/** Dispatches LLM tool calls to mounts. One per process is plenty; it is safe to share. */
export class Dispatcher {
  /** Asks the registry and the approver. */
  readonly client: BusClient;
  /**
   * Calls the targets, replies on `_INBOX_targets` (`mountReplyPrefix`): the inboxes a mount's
   * NATS user may answer onto hold no other reply, neither the registry's and the approver's
   * (`client`) nor JetStream's. Each request on a reply subject of its own, what its target sends
   * counted within a bound (bus/reports.ts), on `targetsConnection` when given.
   */
  private readonly targets: BusClient;
  private readonly sessions: SessionCache;
  private readonly validators = new ArgumentValidators();
  private readonly slots: TargetSlots;
  private readonly options: Required<
    Omit<
      DispatcherOptions,
      | 'source'
      | 'sessions'
      | 'maxInFlightPerTarget'
      | 'maxInFlightPerPrincipal'
      | 'refusals'
      | 'approvalsBucket'
      | 'trailShare'
      | 'telemetry'
      | 'identity'
      | 'targetsConnection'
      | 'replyBudget'
    >
  >;
  private readonly replies: ReplyBudget;
  private readonly approvalsBucket: string | undefined;
  private readonly identity: IdentityGate | undefined;
  /**
   * Aborted when the service stops: calls waiting for a person stop waiting, their approvals kept.
   */
  private readonly stopping = new AbortController();
  private readonly stopWatching: () => void;
  private readonly stopObserving: () => void;
  /** Stops storing hosted MCP servers' definition changes in the trail (none when not auditing). */
  private readonly stopDefinitions: () => void;
  private readonly auditLog: AuditLog;
  /** Every refusal's way into the trail, within its budgets. */
  private readonly refusals: RefusalAudit;

  constructor(
    readonly nc: NatsConnection,
    options: DispatcherOptions = {},
  ) {
    this.client = new BusClient(nc);
    const targets = options.targetsConnection ?? nc;
    this.targets = new BusClient(targets, { inboxPrefix: mountReplyPrefix(targets), replies: ReplyMode.PerRequest });
    this.auditLog = new AuditLog(nc, options.trailShare);
    this.refusals = new RefusalAudit(this.auditLog, options.refusals);
    this.sessions = new SessionCache(options.source ?? busToolSource(this.client), options.sessions);
    this.slots = new TargetSlots(options.maxInFlightPerTarget ?? 1024, options.maxInFlightPerPrincipal);
    const budget = options.replyBudget ?? DEFAULT_REPLY_BUDGET;
    this.replies = new ReplyBudget(budget, budget / 4, () => targets.info?.max_payload ?? 2 ** 20);
    this.options = {
      approvalTimeoutMs: options.approvalTimeoutMs ?? 60_000,
      contentCap: options.contentCap ?? DEFAULT_CONTENT_CAP,
      summaryBudget: options.summaryBudget ?? DEFAULT_SUMMARY_BUDGET,
      maxAttempts: options.maxAttempts ?? 3,
      backoffMs: options.backoffMs ?? 5,
      audit: options.audit ?? true,
    };
    this.approvalsBucket = options.approvalsBucket;
    this.identity = options.identity;
    this.stopWatching = watchRegistry(nc, (event) => this.sessions.heard(event));
    this.stopObserving = observeInFlight(() => this.slots.all());
    this.stopDefinitions = this.options.audit ? recordDefinitionChanges(nc, this.auditLog) : () => undefined;
    if (options.telemetry ?? telemetryRegistered()) observeWithTelemetry();
  }

  /**
   * Runs one tool call for a session. Tool failures are results (`isError: true`); only a
   * session that cannot be resolved for the oracle's own fault (unknown refs, a malformed
   * request) rejects, with a `MatrixError`. `hooks` let a caller hear the target's progress
   * and cancel the call (tasks, the MCP bridge); a plain call passes none.
   */
  async call(
    sessionRequest: ResolveRequest,
    toolCall: ToolCall,
    ctx: CallContext = {},
    hooks?: CallHooks,
  ): Promise<ToolResult> {
    const run = startRun(toolCall, ctx, hooks);
    let result: ToolResult;
    try {
      const found = this.session(sessionRequest, run);
      const session = found instanceof Promise ? await found : found;
      const tool = member(session, run);
      const read = readArguments(
        toolCall,
        tool.inputSchema,
        this.validators,
        this.options.audit ? run.event : undefined,
      );
      const args = read instanceof Promise ? await read : read;
      const to = route(tool, args, session.resolved.timeoutMs, run.event, sessionRequest);
      if (tool.execution?.taskSupport === 'required' && hooks?.asTask !== true) throw failure.taskRequired(tool.name);
      if (to.gated) await this.approve(to, args, run);
      const reply = await this.forward(to, run);
      result = this.shape(reply, to, run);
    } catch (err) {
      result = this.failed(err, run);
    }
    return this.audit(run, result);
  }

  /**
   * Steps 1–2 of a call to run as a task (membership, arguments, route, a tool that allows
   * tasks) and nothing more: the route the call would take, or the error result of its refusal
   * (audited like any refused call). What a task runs before it answers; the task then runs the
   * whole call with `call`.
   */
  async check(sessionRequest: ResolveRequest, toolCall: ToolCall, ctx: CallContext = {}): Promise<Route | ToolResult> {
    const run = startRun(toolCall, ctx, undefined);
    try {
      const found = this.session(sessionRequest, run);
      const session = found instanceof Promise ? await found : found;
      const tool = member(session, run);
      const read = readArguments(toolCall, tool.inputSchema, this.validators, undefined);
      const args = read instanceof Promise ? await read : read;
      const to = route(tool, args, session.resolved.timeoutMs, run.event, sessionRequest);
      if (tool.execution?.taskSupport === 'forbidden') throw failure.taskForbidden(tool.name);
      return to;
    } catch (err) {
      return this.audit(run, this.failed(err, run));
    }
  }

  /**
   * Audits a call refused before it reached this dispatcher's pipeline (at the mount, or for its
   * grant): every call is told. What an unverified caller claims is not identity, and the
   * client's connection is not known here; a valid grant (whose body asked for other authority,
   * or came unreadable) names its principal and session. Such refusals cost nothing to send, so
   * they are bounded (`refusals.ts`): within a budget (one for callers without a valid grant,
   * one per principal) each is stored, past it counted into a summary event instead.
   */
  refused(toolCall: ToolCall, traceparent: string | undefined, why: RefusedCall | string): void {
    const refusal = typeof why === 'string' ? { code: why } : why;
    const { principal, session } = refusal;
    const run = startRun(toolCall, { traceparent, principal, session }, undefined);
    run.event.grantFailure = refusal.grantFailure;
    run.event.grantSubject = refusal.grantSubject;
    if (!this.options.audit) return;
    this.refusals.refused(this.finish(run, 'error', refusal.code), refusal.grantFailure ?? refusal.code, principal);
  }

  /** Calls in flight to `target` now (each holds one of its `maxInFlightPerTarget` slots). */
  inFlight(target: string): number {
    return this.slots.count(target);
  }

  /**
   * Withdraws a pending (or approved, unused) approval of this dispatcher's bucket: a task
   * cancelled because its grant was revoked. False when it is gone, used or rejected.
   */
  withdrawApproval(approvalId: string): Promise<boolean> {
    return withdrawApproval(this.nc, this.approvalsBucket ?? DEFAULT_APPROVALS_BUCKET, approvalId);
  }

  /**
   * Ends every wait for a person's approval now: each such call is refused, its approval kept
   * pending, so the call sent again (same id) after a restart waits for the same approval.
   * Run before draining the mount, or the drain waits for them.
   */
  stopWaiting(): void {
    if (!this.stopping.signal.aborted) this.stopping.abort(new ServiceStopping());
  }

  /**
   * Publishes the audit events not sent yet, stops listening for registry changes, and fails calls
   * still waiting.
   */
  close(): void {
    this.stopWaiting();
    this.stopDefinitions();
    this.refusals.flush();
    this.auditLog.flush();
    this.stopWatching();
    this.stopObserving();
    this.sessions.close();
    this.client.close();
    this.targets.close();
  }

  /**
   * The session of the call, from the cache when it can (then without a promise). A registry
   * that cannot be reached or fails is the call's failure; any other failure to resolve is the
   * oracle's (unknown refs, a malformed request, a forbidden grant) and rejects `call`.
   */
  private session(request: ResolveRequest, run: CallRun): Session | Promise<Session> {
    const failed = (err: unknown): never => {
      if (err instanceof MatrixError && registryFailures.has(err.code)) throw failure.registryFailed(err);
      throw err;
    };
    try {
      const found = this.sessions.get(request, run.context);
      return found instanceof Promise ? found.catch(failed) : found;
    } catch (err) {
      return failed(err);
    }
  }

  /**
   * `approve`: asks `system.approvals`; anything but an approval refuses the call (fail closed).
   */
  private async approve(to: Route, args: Record<string, unknown>, run: CallRun): Promise<void> {
    run.reached = true;
    const { call, context } = run;
    const request = {
      callId: call.id,
      tool: call.name,
      target: to.target,
      op: to.op,
      arguments: args,
      session: context.session,
      principal: context.principal,
    };
    const verdict = await waitForApproval(
      this.client,
      request,
      context,
      {
        deadlineMs: context.deadline ?? Date.now() + this.options.approvalTimeoutMs,
        stopping: this.stopping.signal,
        bucket: this.approvalsBucket,
        windowMs: context.deadline === undefined ? this.options.approvalTimeoutMs : undefined,
      },
      run.hooks,
    );
    const e = run.event;
    e.approvalId = verdict.approvalId;
    e.approvalWaitMs = verdict.waitedMs;
    if (verdict.approved) e.approvedBy = verdict.by;
    else e.rejectedBy = verdict.by;
    if (!verdict.approved) {
      if (run.hooks?.signal?.aborted === true) throw failure.cancelled(call.name, false);
      throw failure.approvalDenied(call.name, verdict.reason);
    }
    // A person may answer minutes later: the grant must hold when the call goes, not only when it came.
    const lapsed = this.identity?.lapsed(context.grant);
    if (lapsed !== undefined) throw failure.grantLapsed(call.name, lapsed.message);
  }

  /**
   * `forward`: the request to the target within its bound of calls in flight, under the
   * smallest deadline, sent again only where `retryDelay` allows. The slot is given back on
   * every way out: a reply, an error reply, a timeout, a throw.
   */
  private async forward(to: Route, run: CallRun): Promise<unknown> {
    run.reached = true;
    const { traceparent, session, principal, readSessions, grant } = run.context;
    const refused = this.slots.take(to.target, principal);
    if (refused === 'target') throw failure.tooManyInFlight(run.call.name, to.target, this.slots.count(to.target));
    if (refused === 'caller')
      throw failure.tooManyOfYours(run.call.name, to.target, this.slots.count(to.target, principal));
    const deadline = deadlineOf(to.timeoutMs, run.context.deadline);
    const callId = newCallId();
    const hooks = run.hooks;
    // One shape for every call: the hooks' fields are undefined on a plain one.
    const options = {
      traceparent,
      session,
      principal,
      readSessions,
      grant: to.withGrant ? grant : undefined,
      deadline,
      json: to.json,
      callId,
      onProgress: hooks?.onProgress,
      progressEveryMs: hooks?.progressEveryMs,
      signal: hooks?.signal,
      replyBytes: undefined as number | undefined,
    };
    // Within the target's budget of replies in flight (bytes), waiting for replies to come back.
    let admitted = false;
    let replyBytes: number | undefined;
    try {
      const waited = this.replies.admit(to.target, principal, deadline, hooks?.signal);
      const why = waited === undefined ? undefined : await waited;
      if (why === 'cancelled') throw failure.cancelled(run.call.name, false);
      if (why === 'deadline')
        throw failure.repliesInFlight(
          run.call.name,
          to.target,
          this.replies.sizeOf(to.target),
          this.replies.boundOf(to.target, principal),
        );
      admitted = true;
      // What its reply is taken to be: a reply past it is counted against the target (`countReply`).
      options.replyBytes = this.replies.sizeOf(to.target);
      if (hooks?.beforeSend !== undefined) await hooks.beforeSend(callId);
      const subject = opSubject(to.target, to.op);
      for (let attempt = 1; ; attempt++) {
        run.event.attempts = attempt;
        try {
          const reply = await this.targets.requestRaw(subject, to.body, options);
          replyBytes = reply.bytes;
          return reply.value;
        } catch (err) {
          // The caller stopped waiting (a cancel, its deadline, a target that flooded it, a cut
          // connection) while the target may still work: tell it, once.
          if (
            err instanceof CancelledError ||
            err instanceof TimeoutError ||
            err instanceof TargetFloodError ||
            err instanceof ConnectionLostError
          ) {
            cancelTarget(this.targets, to.target, callId, run.context);
            if (err instanceof CancelledError) throw failure.cancelled(run.call.name, true);
          }
          const wait = retryDelay(to, err, attempt, deadline, this.options);
          if (wait === undefined) throw targetFailed(run.call.name, to, err);
          await new Promise((resolve) => setTimeout(resolve, wait));
        }
      }
    } finally {
      if (admitted) this.replies.release(to.target, principal, replyBytes);
      this.slots.give(to.target, principal);
    }
  }

  /** `shape`: the reply as the model reads it, by the tool's `resultMode`, within the cap. */
  private shape(reply: unknown, to: Route, run: CallRun): ToolResult {
    let shaped: Shaped;
    try {
      shaped = shapeReply(reply, to.tool.resultMode, {
        cap: this.options.contentCap,
        summaryBudget: this.options.summaryBudget,
      });
    } catch (err) {
      // A reply nested thousands of levels deep overflows JSON.stringify: still a result.
      throw failure.unshowableReply(run.call.name, err);
    }
    const result: ToolResult = {
      callId: run.call.id,
      name: run.call.name,
      isError: isFailedToolReply(reply),
      content: shaped.content,
      durationMs: 0,
    };
    if (shaped.structured !== undefined) result.structured = shaped.structured;
    if (shaped.truncated !== undefined) result.truncated = shaped.truncated;
    return result;
  }

  /**
   * The result of a call a step refused; a session error of the oracle's own is audited (as a
   * refusal, within its principal's budget, when it has one), then thrown.
   */
  private failed(err: unknown, run: CallRun): ToolResult {
    if (err instanceof CallFailure) return errorResult(run.call.id, run.call.name, err);
    if (err instanceof MatrixError) {
      this.record(run, 'error', err.code);
      throw err;
    }
    return errorResult(run.call.id, run.call.name, failure.unexpected(run.call.name, err));
  }

  /** `audit`: the call's event, published whatever the outcome (`record`); stamps the result's duration. */
  private audit(run: CallRun, result: ToolResult): ToolResult {
    const code = result.error?.code;
    result.durationMs = this.record(run, !result.isError ? 'ok' : code === 'cancelled' ? 'cancelled' : 'error', code);
    return result;
  }

  /**
   * Publishes the call's audit event (when auditing is on); returns the call's duration in ms. A
   * principal's calls refused before they reached an approver or a target (a session that did
   * not resolve, a tool not in the session, refused arguments) cost it nothing to send: they go
   * through its refusal budget (`RefusalAudit`), past which they are counted into a summary under
   * its name. Every call that reached a target or an approver is stored.
   */
  private record(run: CallRun, outcome: CallEvent['outcome'], code: string | undefined): number {
    if (!this.options.audit) return elapsed(run);
    const principal = run.context.principal;
    if (outcome !== 'ok' && !run.reached && principal !== undefined) {
      const refused = this.finish(run, 'error', code);
      this.refusals.refused(refused, code ?? 'internal', principal);
      return refused.durationMs;
    }
    const e = this.finish(run, outcome, code);
    this.auditLog.record(e);
    return e.durationMs;
  }

  /** The call's event, filled in at its end. */
  private finish(run: CallRun, outcome: CallEvent['outcome'], code: string | undefined): CallEvent {
    const e = run.event;
    e.outcome = outcome;
    e.code = code;
    e.durationMs = elapsed(run);
    e.at = isoNow();
    e.session = run.context.session;
    e.principal = run.context.principal;
    e.traceparent = run.context.traceparent;
    return e;
  }
}

/** The call's duration so far, in ms, to the microsecond. */
function elapsed(run: CallRun): number {
  return Math.round((performance.now() - run.started) * 1000) / 1000;
}

/**
 * Failures to resolve a session that are the registry's, not the oracle's: the call's result
 * says so.
 */
const registryFailures = new Set<string>([ErrorCode.Unavailable, ErrorCode.Timeout, ErrorCode.Internal]);

/** `member`: the tool, when the session has it by that name (PROTOCOL 6.1 step 1). */
function member(session: Session, run: CallRun): ResolvedTool {
  const name = run.call.name;
  const tool = session.tools.get(name);
  if (tool !== undefined) {
    run.event.target = tool.target;
    run.event.op = tool.op;
    return tool;
  }
  if (session.sdkTools.has(name)) throw failure.sdkTool(name);
  throw failure.notInSession(name, [...session.tools.keys()]);
}

/** A call at its start: the context with a `traceparent`, an audit event with every field. */
function startRun(call: ToolCall, ctx: CallContext, hooks: CallHooks | undefined): CallRun {
  // Field by field, not a spread: every call's context has one shape (as `RequestContext`
  // in bus/mount.ts).
  const context: CallContext = {
    traceparent: ctx.traceparent ?? newTraceparent(),
    deadline: ctx.deadline,
    session: ctx.session,
    principal: ctx.principal,
    grant: ctx.grant,
    readSessions: ctx.readSessions,
    callId: ctx.callId,
  };
  const event = newCallEvent(call.id, call.name);
  return { call, context, event, started: performance.now(), reached: false, hooks };
}
