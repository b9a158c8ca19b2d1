/**
 * Where a call goes and how it is sent. The `route` step: where a checked call goes, and whether
 * it needs approval first. A tool goes to its projection's `<target>.<op>`; the `matrix_invoke`
 * meta-tool (PROTOCOL 6.2) goes to `args.target`/`args.op`, only where its context's
 * `allowTargets` allow, never to a reserved subject, and always behind approval; the search tool
 * (PROTOCOL 13) goes to `system.tools.$search` with the calling session and its grant, so the
 * search sees what the session may use and nothing more. Then what the
 * `forward` step obeys besides the deadline: a bound of calls in flight per target (taken
 * before the request, given back on every way out), and when a failed request may be sent
 * again (PROTOCOL 6.1: after no responders, the request delivered to no one, or after a
 * transient failure of an idempotent tool; never an approved call).
 */

import type { CallEvent } from '../audit/events.js';
import {
  ConnectionLostError,
  ErrorCode,
  MatrixError,
  NoRespondersError,
  ReplyShapeError,
  TargetFloodError,
} from '../bus/errors.js';
import { isReservedSubject, Mounts, opSubject, subjectMatches } from '../bus/subjects.js';
import type { ResolvedTool, ResolveRequest } from '../registry/types.js';
import { failure } from './results.js';

/** Where a call goes, once checked: the request the forward step sends. */
export interface Route {
  /** The tool as resolved for the session. */
  tool: ResolvedTool;
  /** The mount called. */
  target: string;
  /** The op called on it. */
  op: string;
  /** `<target>.<op>`. */
  subject: string;
  /** The request body. */
  body: unknown;
  /** Ask `system.approvals` before sending. */
  gated: boolean;
  /** Sent at most once, whatever comes back (an approved call: see `routeTo`). */
  sentOnce: boolean;
  /** Longest wait for the target, in ms (the caller's deadline may cut it shorter). */
  timeoutMs: number;
  /** Send the request as JSON (the projection says `encoding: "json"`). */
  json: boolean;
  /**
   * The request may be sent again after an answer that failed (an idempotent tool, never an
   * approved call).
   */
  idempotent: boolean;
  /** Send the caller's grant along: the target (`system.tools.$search`) admits the session by it. */
  withGrant: boolean;
}

/**
 * A route, and how its call may be sent (the one place this is decided): an approved call (a tool
 * that requires approval, every `matrix_invoke`) reaches its target at most once, idempotent or
 * not, whatever comes back. One approval is for one request, and the server's "no responders"
 * (an empty 503: delivered to no one) cannot be told from the same status a target sends itself
 * after doing the work. Any other call is sent again after no responders, and an idempotent
 * tool's after a transient failure (`retryDelay`).
 */
function routeTo(
  tool: ResolvedTool,
  to: { target: string; op: string; body: unknown; timeoutMs: number; json: boolean },
  gated: boolean,
  idempotent: boolean,
  withGrant = false,
): Route {
  const { target, op, body, timeoutMs, json } = to;
  const subject = opSubject(target, op);
  const sentOnce = gated;
  return {
    tool,
    target,
    op,
    subject,
    body,
    gated,
    timeoutMs,
    json,
    sentOnce,
    idempotent: idempotent && !gated,
    withGrant,
  };
}

/**
 * The route of a call to `tool` with valid `args`; throws `CallFailure` (`forbidden`) for a
 * `matrix_invoke` its context does not allow. `sessionTimeoutMs` is the session's own bound;
 * `event`, the audit event, gets a `matrix_invoke`'s destination; `session`, the calling session's
 * request, is what the search tool searches.
 */
export function route(
  tool: ResolvedTool,
  args: Record<string, unknown>,
  sessionTimeoutMs: number,
  event?: CallEvent,
  session?: ResolveRequest,
): Route {
  const timeoutMs = tool.timeoutMs ?? sessionTimeoutMs;
  if (isInvokeTool(tool)) return invokeRoute(tool, args, timeoutMs, event);
  if (isSearchTool(tool) && session !== undefined) {
    const body =
      args.limit === undefined ? { session, query: args.query } : { session, query: args.query, limit: args.limit };
    return routeTo(tool, { target: tool.target, op: tool.op, body, timeoutMs, json: false }, false, true, true);
  }
  const to = { target: tool.target, op: tool.op, body: args, timeoutMs, json: tool.encoding === 'json' };
  return routeTo(tool, to, tool.requiresApproval, tool.annotations?.idempotent === true);
}

/** The routing policy of `matrix_invoke`. */
function invokeRoute(
  tool: ResolvedTool,
  args: Record<string, unknown>,
  timeoutMs: number,
  event: CallEvent | undefined,
): Route {
  const target = String(args.target);
  const op = String(args.op);
  // Audited where it meant to go, refused or not.
  if (event !== undefined) {
    event.target = target;
    event.op = op;
  }
  const subject = opSubject(target, op);
  if (isReservedSubject(subject)) throw failure.reservedTarget(subject, target);
  const allowed = tool.allowTargets ?? [];
  if (!allowed.some((pattern) => subjectMatches(pattern, subject))) throw failure.targetNotAllowed(subject, allowed);
  return routeTo(tool, { target, op, body: args.args ?? {}, timeoutMs, json: false }, true, false);
}

/**
 * Is this the search tool of a deferred session (PROTOCOL 13: `system.tools.$search`, given the
 * session)? Told here, not in the registry's code, so a warm call runs no search code.
 */
export function isSearchTool(tool: ResolvedTool): boolean {
  return tool.target === Mounts.Tools && tool.op === '$search';
}

/** Is this the `matrix_invoke` meta-tool (forwarded to `args.target`/`args.op`)? */
export function isInvokeTool(tool: ResolvedTool): boolean {
  return tool.target === Mounts.Dispatcher && tool.op === '$invoke';
}

/** Why a slot was not given: the target's bound, or the caller's share of it. */
export type SlotRefusal = 'target' | 'caller';

/**
 * Calls in flight, per target mount, within a bound; and per principal within a share of it,
 * so one agent cannot take every slot of a target another agent needs. Calls with no principal
 * (no grant: a library caller, a service without trust) share only the target's bound.
 */
export class TargetSlots {
  private readonly taken = new Map<string, number>();
  private readonly byCaller = new Map<string, number>();

  /**
   * @param max most calls in flight to one target.
   * @param perCaller most of them one principal may hold; default a quarter of `max` (at least 1).
   */
  constructor(
    private readonly max: number,
    private readonly perCaller = Math.max(1, Math.floor(max / 4)),
  ) {}

  /** Takes a slot for `target` (and `principal`'s share of it); what refused it, if anything. */
  take(target: string, principal?: string): SlotRefusal | undefined {
    const n = this.taken.get(target) ?? 0;
    if (n >= this.max) return 'target';
    if (principal !== undefined) {
      const key = callerKey(target, principal);
      const mine = this.byCaller.get(key) ?? 0;
      if (mine >= this.perCaller) return 'caller';
      this.byCaller.set(key, mine + 1);
    }
    this.taken.set(target, n + 1);
    return undefined;
  }

  /** Gives back a slot taken for `target` (by `principal`). */
  give(target: string, principal?: string): void {
    release(this.taken, target);
    if (principal !== undefined) release(this.byCaller, callerKey(target, principal));
  }

  /** Calls in flight to `target` now (by `principal`, when given). */
  count(target: string, principal?: string): number {
    return (principal === undefined ? this.taken.get(target) : this.byCaller.get(callerKey(target, principal))) ?? 0;
  }

  /** Calls in flight to every target with one or more (for the in-flight gauge). */
  all(): ReadonlyMap<string, number> {
    return this.taken;
  }
}

function callerKey(target: string, principal: string): string {
  // A mount name has no space; the principal follows the first one.
  return `${target} ${principal}`;
}

function release(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left <= 0) counts.delete(key);
  else counts.set(key, left);
}

/** How retries go. */
export interface RetryPolicy {
  /** Most requests per call. */
  maxAttempts: number;
  /** First backoff, in ms, doubling each time (with jitter). */
  backoffMs: number;
}

/**
 * How long to wait before attempt `attempt + 1`, or undefined to give up. A route sent once (an
 * approved call, `routeTo`) is never sent again. Any other route is sent again after no
 * responders: the server sends that status for a request it delivered to no one (a target that
 * sends it itself after doing the work has the call again). An answer (an error reply, a
 * mount's own 503 included) is final unless the route is idempotent, and then only
 * `internal`/`unavailable` are retried. Never after a target flooded its reply, nor after a timeout (the target may still be working),
 * never past the deadline.
 */
export function retryDelay(
  route: Route,
  err: unknown,
  attempt: number,
  deadline: number,
  policy: RetryPolicy,
): number | undefined {
  // A target that flooded its reply, or answered one refused for its shape, would do it to the
  // next request too. A request on a connection that was lost may have run, and one sent again
  // while it reconnects may be lost itself.
  if (
    attempt >= policy.maxAttempts ||
    route.sentOnce ||
    err instanceof TargetFloodError ||
    err instanceof ReplyShapeError ||
    err instanceof ConnectionLostError
  )
    return undefined;
  const reachedNobody = err instanceof NoRespondersError;
  const transient =
    err instanceof MatrixError && (err.code === ErrorCode.Internal || err.code === ErrorCode.Unavailable);
  if (!reachedNobody && !(route.idempotent && transient)) return undefined;
  const wait = policy.backoffMs * 2 ** (attempt - 1) * (0.5 + Math.random() / 2);
  return Date.now() + wait < deadline ? wait : undefined;
}
