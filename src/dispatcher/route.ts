/**
 * The `route` step: where a checked call goes, and whether it needs approval first. A tool goes
 * to its projection's `<target>.<op>`; the `matrix_invoke` meta-tool (PROTOCOL 6.2) goes to
 * `args.target`/`args.op`, only where its context's `allowTargets` allow, never to a reserved
 * subject, and always behind approval.
 */

import type { CallEvent } from '../audit/types.js';
import { isReservedSubject, Mounts, opSubject, subjectMatches } from '../bus/subjects.js';
import type { ResolvedTool } from '../registry/types.js';
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
  /** The request may be sent again after an answer that failed (an idempotent tool, never an approved call). */
  idempotent: boolean;
}

/**
 * A route, and how its call may be sent (the one place this is decided): an approved call (a
 * tool that requires approval, every `matrix_invoke`) reaches its target at most once,
 * idempotent or not, whatever comes back. One approval is for one request, and an empty 503 "no responders" cannot be told
 * from one the target sends itself after doing the work. Any other call that reached nobody may
 * be sent again, and an idempotent tool's after a transient failure (`retryDelay`).
 */
function routeTo(
  tool: ResolvedTool,
  to: { target: string; op: string; body: unknown; timeoutMs: number; json: boolean },
  gated: boolean,
  idempotent: boolean,
): Route {
  const { target, op, body, timeoutMs, json } = to;
  const subject = opSubject(target, op);
  return { tool, target, op, subject, body, gated, timeoutMs, json, sentOnce: gated, idempotent: idempotent && !gated };
}

/**
 * The route of a call to `tool` with valid `args`; throws `CallFailure` (`forbidden`) for a
 * `matrix_invoke` its context does not allow. `sessionTimeoutMs` is the session's own bound;
 * `event`, the audit event, gets a `matrix_invoke`'s destination.
 */
export function route(
  tool: ResolvedTool,
  args: Record<string, unknown>,
  sessionTimeoutMs: number,
  event?: CallEvent,
): Route {
  const timeoutMs = tool.timeoutMs ?? sessionTimeoutMs;
  if (isInvokeTool(tool)) return invokeRoute(tool, args, timeoutMs, event);
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

/** Is this the `matrix_invoke` meta-tool (forwarded to `args.target`/`args.op`)? */
export function isInvokeTool(tool: ResolvedTool): boolean {
  return tool.target === Mounts.Dispatcher && tool.op === '$invoke';
}
