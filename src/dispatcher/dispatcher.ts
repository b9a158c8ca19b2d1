/**
 * The dispatcher (PROTOCOL 6.1): an LLM tool call in, a `ToolResult` out. In order, none
 * skipped: membership, argument validation, approval (fail closed), the request to
 * `<target>.<op>` under the smallest deadline with the context headers, result shaping.
 * Nothing outside the session's context, with invalid arguments, or unapproved ever
 * reaches a target. Every call emits one audit event.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient } from '../bus/client.js';
import { type CallContext, deadlineOf, newTraceparent } from '../bus/context.js';
import { ErrorCode, MatrixError, UnavailableError } from '../bus/errors.js';
import { isReservedSubject, Mounts, opSubject, subjectMatches } from '../bus/subjects.js';
import { MATRIX_INVOKE } from '../registry/builtins.js';
import { sha256Hex } from '../registry/canonical.js';
import { watchRegistry } from '../registry/events.js';
import type { ResolvedTool, ResolveRequest } from '../registry/types.js';
import { approvalGate } from './approval.js';
import { ArgumentValidators, argumentsMessage, parseArguments } from './arguments.js';
import { AuditLog, isoNow } from './audit.js';
import { busToolSource, type Session, SessionCache, type SessionCacheOptions, type ToolSource } from './sessions.js';
import { DEFAULT_CONTENT_CAP, type Shaped, shapeReply } from './shape.js';
import { DEFAULT_SUMMARY_BUDGET } from './summary.js';
import type { CallEvent, ToolCall, ToolErrorCode, ToolResult } from './types.js';

/** How a dispatcher behaves; every field has a default. */
export interface DispatcherOptions {
  /** Where sessions are resolved; default `system.tools` over the bus. */
  source?: ToolSource;
  /** Session cache tuning. */
  sessions?: SessionCacheOptions;
  /** Longest wait for an approver, in ms; default 60000 (never past the caller's deadline). */
  approvalTimeoutMs?: number;
  /** Most calls in flight per target mount; past it a call fails fast. Default 1024. */
  maxInFlightPerTarget?: number;
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
}

/** Where a call goes, once checked. */
interface Forward {
  target: string;
  op: string;
  body: unknown;
  tool: ResolvedTool;
  timeoutMs: number;
}

/** What a call needed to know about its tool, for the audit event. */
interface Trace {
  event: CallEvent;
  started: number;
}

/** Dispatches LLM tool calls to mounts. One per process is plenty; it is safe to share. */
export class Dispatcher {
  readonly client: BusClient;
  private readonly sessions: SessionCache;
  private readonly validators = new ArgumentValidators();
  private readonly inFlight = new Map<string, number>();
  private readonly options: Required<Omit<DispatcherOptions, 'source' | 'sessions'>>;
  private readonly stopWatching: () => void;
  private readonly auditLog: AuditLog;

  constructor(
    readonly nc: NatsConnection,
    options: DispatcherOptions = {},
  ) {
    this.client = new BusClient(nc);
    this.auditLog = new AuditLog(nc);
    this.sessions = new SessionCache(options.source ?? busToolSource(this.client), options.sessions);
    this.options = {
      approvalTimeoutMs: options.approvalTimeoutMs ?? 60_000,
      maxInFlightPerTarget: options.maxInFlightPerTarget ?? 1024,
      contentCap: options.contentCap ?? DEFAULT_CONTENT_CAP,
      summaryBudget: options.summaryBudget ?? DEFAULT_SUMMARY_BUDGET,
      maxAttempts: options.maxAttempts ?? 3,
      backoffMs: options.backoffMs ?? 5,
      audit: options.audit ?? true,
    };
    this.stopWatching = watchRegistry(nc, (event) => this.sessions.clear(Number(event?.revision) || 0));
  }

  /**
   * Runs one tool call for a session. Tool failures are results (`isError: true`); only a
   * session that cannot be resolved for the oracle's own fault (unknown refs, a malformed
   * request) rejects, with a `MatrixError`.
   */
  call(sessionRequest: ResolveRequest, call: ToolCall, ctx: CallContext = {}): Promise<ToolResult> {
    const trace: Trace = {
      started: performance.now(),
      // Every field from the start: one object shape, however the call ends.
      event: {
        callId: call.id,
        name: call.name,
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
      },
    };
    const context: CallContext = { ...ctx, traceparent: ctx.traceparent ?? newTraceparent() };
    let session: Session | Promise<Session>;
    try {
      session = this.sessions.get(sessionRequest, context);
    } catch (err) {
      return this.sessionFailed(err, trace, context, call);
    }
    // Warm path: no await between the call and the request to the target.
    if (!(session instanceof Promise)) return this.callInSession(session, call, context, trace);
    return session.then(
      (s) => this.callInSession(s, call, context, trace),
      (err: unknown) => this.sessionFailed(err, trace, context, call),
    );
  }

  /** Stops listening for registry changes and fails calls still waiting. */
  close(): void {
    this.auditLog.flush();
    this.stopWatching();
    this.client.close();
  }

  private sessionFailed(err: unknown, trace: Trace, ctx: CallContext, call: ToolCall): Promise<ToolResult> {
    if (err instanceof MatrixError && (err.code === ErrorCode.Unavailable || err.code === ErrorCode.Timeout)) {
      return Promise.resolve(this.fail(trace, ctx, call, err.code, `The tool registry could not be reached (${err.message}); try the call again shortly.`));
    }
    this.audit(trace, ctx, 'error', err instanceof MatrixError ? err.code : ErrorCode.Internal);
    return Promise.reject(err);
  }

  private callInSession(session: Session, call: ToolCall, ctx: CallContext, trace: Trace): Promise<ToolResult> {
    const refuse = (code: ToolErrorCode, message: string) => Promise.resolve(this.fail(trace, ctx, call, code, message));
    // 1. Membership.
    const tool = session.tools.get(call.name);
    if (tool === undefined) {
      if (session.sdkTools.has(call.name)) {
        return refuse('forbidden', `"${call.name}" is one of your own SDK tools, not a bus tool: call it directly, not through the dispatcher.`);
      }
      const available = [...session.tools.keys()].join(', ') || 'none';
      return refuse('not_found', `No tool named "${call.name}" is available in this session. Available tools: ${available}.`);
    }
    trace.event.target = tool.target;
    trace.event.op = tool.op;

    // 2. Arguments.
    const parsed = parseArguments(call.arguments);
    if (!parsed.ok) {
      return refuse('bad_request', `The arguments of "${call.name}" could not be read: ${parsed.reason}. Send a JSON object that matches the tool's schema.`);
    }
    const args = parsed.value;
    if (this.options.audit) {
      const argumentsText = JSON.stringify(args);
      trace.event.argumentsDigest = sha256Hex(argumentsText).slice(0, 16);
      trace.event.argumentsBytes = Buffer.byteLength(argumentsText);
    }
    let violations: ReturnType<ReturnType<ArgumentValidators['check']>>;
    try {
      violations = this.validators.check(tool.inputSchema)(args);
    } catch (err) {
      return refuse(
        'internal',
        `"${call.name}" cannot be called: its input schema does not compile (${(err as Error).message}). Use another tool; the context's owner must fix it.`,
      );
    }
    if (violations !== undefined) return refuse('bad_request', argumentsMessage(call.name, violations));

    let target = tool.target;
    let op = tool.op;
    let body: unknown = args;
    let gated = tool.requiresApproval;
    if (isInvokeTool(tool)) {
      // 6.2: the meta-tool reaches only what allowTargets allow, never a reserved subject, always approved.
      target = String(args.target);
      op = String(args.op);
      body = args.args ?? {};
      gated = true;
      trace.event.target = target;
      trace.event.op = op;
      const subject = opSubject(target, op);
      if (isReservedSubject(subject)) {
        return refuse('forbidden', `${MATRIX_INVOKE} may not call ${subject}: ${target} is reserved. Choose another mount.`);
      }
      const allowed = tool.allowTargets ?? [];
      if (!allowed.some((pattern) => subjectMatches(pattern, subject))) {
        return refuse('forbidden', `${MATRIX_INVOKE} may not call ${subject}: this session allows only ${allowed.join(', ') || 'no targets'}.`);
      }
    }
    const timeoutMs = tool.timeoutMs ?? session.resolved.timeoutMs;
    const request: Forward = { target, op, body, tool, timeoutMs };
    if (!gated) return this.forwardAndShape(request, call, ctx, trace);

    // 3. Approval, fail closed.
    return approvalGate(
      this.client,
      { callId: call.id, tool: call.name, target, op, arguments: args, session: ctx.session, principal: ctx.principal },
      ctx,
      this.options.approvalTimeoutMs,
    ).then((verdict) =>
      verdict.approved
        ? this.forwardAndShape(request, call, ctx, trace)
        : this.fail(
            trace,
            ctx,
            call,
            'approval_denied',
            `The call to "${call.name}" was not made: ${verdict.reason}. Do not retry it unchanged; ask the user how to proceed.`,
          ),
    );
  }

  /** 4. Forward, under the smallest deadline, within the bound of calls in flight; 5. shape. */
  private forwardAndShape(request: Forward, call: ToolCall, ctx: CallContext, trace: Trace): Promise<ToolResult> {
    const { target, op, timeoutMs } = request;
    const inFlight = this.inFlight.get(target) ?? 0;
    if (inFlight >= this.options.maxInFlightPerTarget) {
      return Promise.resolve(
        this.fail(
          trace,
          ctx,
          call,
          'unavailable',
          `${target} already has ${inFlight} calls in flight, the most allowed; try "${call.name}" again in a moment.`,
        ),
      );
    }
    this.inFlight.set(target, inFlight + 1);
    const release = () => {
      const left = (this.inFlight.get(target) ?? 1) - 1;
      if (left === 0) this.inFlight.delete(target);
      else this.inFlight.set(target, left);
    };
    const deadline = deadlineOf(timeoutMs, ctx.deadline);
    const shape = (reply: unknown): ToolResult => {
      release();
      let shaped: Shaped;
      try {
        shaped = shapeReply(reply, request.tool.resultMode, { cap: this.options.contentCap, summaryBudget: this.options.summaryBudget });
      } catch (err) {
        // A reply nested thousands of levels deep overflows JSON.stringify: still a result.
        return this.fail(
          trace,
          ctx,
          call,
          'internal',
          `"${call.name}" answered with a reply that cannot be shown as text (${(err as Error).message}); its service must fix it. Use another tool.`,
        );
      }
      const durationMs = this.audit(trace, ctx, 'ok');
      const result: ToolResult = { callId: call.id, name: call.name, isError: false, content: shaped.content, durationMs };
      if (shaped.structured !== undefined) result.structured = shaped.structured;
      if (shaped.truncated !== undefined) result.truncated = shaped.truncated;
      return result;
    };
    // One handler pair for every attempt: a reply that comes at once takes no extra promise.
    const attempt = (n: number): Promise<ToolResult> => {
      trace.event.attempts = n;
      const options = { traceparent: ctx.traceparent, session: ctx.session, principal: ctx.principal, readSessions: ctx.readSessions, deadline };
      return this.client.request(target, op, request.body, options).then(shape, (err: unknown) => {
        const wait = this.retryWait(request.tool, err, n, deadline);
        if (wait !== undefined) return new Promise<void>((resolve) => setTimeout(resolve, wait)).then(() => attempt(n + 1));
        release();
        return this.targetFailed(trace, ctx, call, target, op, timeoutMs, err);
      });
    };
    return attempt(1);
  }

  /**
   * How long to wait before attempt `n + 1`, or undefined to give up: no responders are
   * retried always, internal/unavailable failures only for idempotent tools, never a timeout,
   * never past the deadline.
   */
  private retryWait(tool: ResolvedTool, err: unknown, n: number, deadline: number): number | undefined {
    if (n >= this.options.maxAttempts) return undefined;
    const idempotent = tool.annotations?.idempotent === true && !isInvokeTool(tool);
    const code = err instanceof MatrixError ? err.code : ErrorCode.Internal;
    const retryable = err instanceof UnavailableError || (idempotent && code === ErrorCode.Internal);
    if (!retryable) return undefined;
    const wait = this.options.backoffMs * 2 ** (n - 1) * (0.5 + Math.random() / 2);
    return Date.now() + wait < deadline ? wait : undefined;
  }

  private targetFailed(trace: Trace, ctx: CallContext, call: ToolCall, target: string, op: string, timeoutMs: number, err: unknown): ToolResult {
    const subject = opSubject(target, op);
    if (!(err instanceof MatrixError)) {
      return this.fail(trace, ctx, call, 'internal', `"${call.name}" failed unexpectedly in the dispatcher; try again, or use another tool.`);
    }
    switch (err.code) {
      case ErrorCode.Timeout:
        return this.fail(
          trace,
          ctx,
          call,
          'timeout',
          `"${call.name}" did not answer in time (${subject}, at most ${timeoutMs} ms or the caller's deadline). It may still be running: check its effect before repeating a call that changes things.`,
        );
      case ErrorCode.Unavailable:
        return this.fail(
          trace,
          ctx,
          call,
          'unavailable',
          `No service is answering "${call.name}" right now (${subject} has no responders). Try again later, or use another tool.`,
        );
      case ErrorCode.BadRequest:
        return this.fail(trace, ctx, call, 'bad_request', `"${call.name}" refused its arguments: ${err.message}. Fix them and call again.`);
      default:
        return this.fail(trace, ctx, call, err.code, `"${call.name}" failed (${err.code}): ${err.message}`);
    }
  }

  private fail(trace: Trace, ctx: CallContext, call: ToolCall, code: ToolErrorCode, message: string): ToolResult {
    const durationMs = this.audit(trace, ctx, 'error', code);
    return { callId: call.id, name: call.name, isError: true, content: message, error: { code, message }, durationMs };
  }

  /** Publishes the call's audit event; returns its duration in ms. */
  private audit(trace: Trace, ctx: CallContext, outcome: CallEvent['outcome'], code?: string): number {
    const durationMs = Math.round((performance.now() - trace.started) * 1000) / 1000;
    if (!this.options.audit) return durationMs;
    const e = trace.event;
    e.outcome = outcome;
    e.durationMs = durationMs;
    e.at = isoNow();
    // Every field exists from the start (undefined ones are left out on the wire).
    e.code = code;
    e.session = ctx.session;
    e.principal = ctx.principal;
    e.traceparent = ctx.traceparent;
    this.auditLog.record(e);
    return durationMs;
  }
}

/** Is this the `matrix_invoke` meta-tool (forwarded to `args.target`/`args.op`)? */
function isInvokeTool(tool: ResolvedTool): boolean {
  return tool.target === Mounts.Dispatcher && tool.op === '$invoke';
}
