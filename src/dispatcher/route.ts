/**
 * The `route` step: where a checked call goes, and whether it needs approval first. A tool goes
 * to its projection's `<target>.<op>`; the `matrix_invoke` meta-tool (PROTOCOL 6.2) goes to
 * `args.target`/`args.op`, only where its context's `allowTargets` allow, never to a reserved
 * subject, and always behind approval.
 */

import type { CallEvent } from '../audit/types.js';
import { isReservedSubject, Mounts, opSubject, subjectMatches } from '../bus/subjects.js';
import type { ResolvedTool } from '../registry/types.js';
import { refuse } from './results.js';

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
  /** Longest wait for the target, in ms (the caller's deadline may cut it shorter). */
  timeoutMs: number;
  /** Send the request as JSON (the projection says `encoding: "json"`). */
  json: boolean;
  /** The request may be sent again after an answer that failed (an idempotent tool, never an approved call). */
  idempotent: boolean;
}

/**
 * The route of a call to `tool` with valid `args`; throws `CallRefused` (`forbidden`) for a
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
  return {
    tool,
    target: tool.target,
    op: tool.op,
    subject: opSubject(tool.target, tool.op),
    body: args,
    gated: tool.requiresApproval,
    timeoutMs,
    json: tool.encoding === 'json',
    // An approved call reaches its target at most once, idempotent or not.
    idempotent: tool.annotations?.idempotent === true && !tool.requiresApproval,
  };
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
  if (isReservedSubject(subject)) throw refuse.reservedTarget(subject, target);
  const allowed = tool.allowTargets ?? [];
  if (!allowed.some((pattern) => subjectMatches(pattern, subject))) throw refuse.targetNotAllowed(subject, allowed);
  return { tool, target, op, subject, body: args.args ?? {}, gated: true, timeoutMs, json: false, idempotent: false };
}

/** Is this the `matrix_invoke` meta-tool (forwarded to `args.target`/`args.op`)? */
export function isInvokeTool(tool: ResolvedTool): boolean {
  return tool.target === Mounts.Dispatcher && tool.op === '$invoke';
}
