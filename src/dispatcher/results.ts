/**
 * Every way a call can fail, as the result the model reads (PROTOCOL 6.1: a failed tool is a
 * result, `isError: true`). Each message says what happened and what the model may do next;
 * they are all written here, so they read alike and change in one place.
 */
import {
  ErrorCode,
  MatrixError,
  NoRespondersError,
  ReplyShapeError,
  TargetFloodError,
  UnsendableRequestError,
  type Violation,
} from '../bus/errors.js';
import { describeViolations } from '../bus/schema-compiler.js';
import { MATRIX_INVOKE } from '../registry/builtins.js';
import type { ReplyBound } from './reply-budget.js';
import type { Route } from './route.js';
import type { ToolErrorCode, ToolResult } from './types.js';

/**
 * A call that ends as an error result. Thrown by the steps of the pipeline and caught once, at
 * its end; never crosses the wire as an error (the `ToolResult` does).
 */
export class CallFailure extends Error {
  override name = 'CallFailure';

  constructor(
    readonly code: ToolErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * Longest message an error result carries, in characters: a target's own error message is its
 * to write, and uncut it would make a result (and the task record that keeps it) as large as the
 * target likes, twice over (`content` and `error.message`).
 */
export const MAX_ERROR_MESSAGE_CHARS = 4096;

/** The error result of a failed call (its `durationMs` is filled in by the audit step). */
export function errorResult(callId: string, name: string, failed: CallFailure): ToolResult {
  const message = boundedMessage(failed.message);
  const error = { code: failed.code, message };
  return { callId, name, isError: true, content: message, error, durationMs: 0 };
}

/** A message within `MAX_ERROR_MESSAGE_CHARS`, saying how much was cut. */
function boundedMessage(message: string): string {
  if (message.length <= MAX_ERROR_MESSAGE_CHARS) return message;
  const cut = message.length - MAX_ERROR_MESSAGE_CHARS;
  return `${message.slice(0, MAX_ERROR_MESSAGE_CHARS)}… (${cut} more characters cut)`;
}

/**
 * The failures, by the step that makes them. Those before the target is reached (membership,
 * arguments, route, approval, the in-flight bound) are refusals: the call was not made.
 */
export const failure = {
  /**
   * The caller's side: `system.dispatcher` was not reached, or refused the request itself (a
   * body too large or too deep to send, a grant expired or revoked since the session opened, no
   * answer in time): the call was not made, and the model reads why.
   */
  dispatcherAnswered: (tool: string, err: MatrixError) =>
    new CallFailure(err.code, `"${tool}" could not be run: system.dispatcher answered ${err.code}: ${err.message}`, {
      cause: err,
    }),

  /** The session: the registry did not answer, or failed. */
  registryFailed: (err: MatrixError) =>
    new CallFailure(
      err.code,
      `The tool registry could not resolve this session (${err.message}); try the call again shortly.`,
      { cause: err },
    ),

  /** Membership: an SDK tool sent to the bus. */
  sdkTool: (tool: string) =>
    new CallFailure(
      'forbidden',
      `"${tool}" is one of your own SDK tools, not a bus tool: call it directly, not through the dispatcher.`,
    ),

  /** Membership: no such tool in the session. */
  notInSession: (tool: string, available: readonly string[]) =>
    new CallFailure(
      'not_found',
      `No tool named "${tool}" is available in this session. Available tools: ${available.join(', ') || 'none'}.`,
    ),

  /** Arguments: not JSON, or not an object. */
  unreadableArguments: (tool: string, reason: string) =>
    new CallFailure(
      'bad_request',
      `The arguments of "${tool}" could not be read: ${reason}. Send a JSON object that matches the tool's schema.`,
    ),

  /** Arguments: something no target can be sent. */
  refusedArguments: (tool: string, reason: string) =>
    new CallFailure(
      'bad_request',
      `The arguments of "${tool}" were refused: ${reason}. Fix them and call "${tool}" again.`,
    ),

  /** Arguments: schema violations. */
  invalidArguments: (tool: string, violations: readonly Violation[]) =>
    new CallFailure('bad_request', argumentsMessage(tool, violations)),

  /** Arguments: the tool's own schema is broken. */
  schemaBroken: (tool: string, err: unknown) =>
    new CallFailure(
      'internal',
      `"${tool}" cannot be called: its input schema does not compile (${(err as Error).message}). Use another tool; the context's owner must fix it.`,
    ),
  /** Arguments: the compiler thread holds as many schemas as it may, or stopped before it compiled this one. */
  schemaCompiling: (tool: string, err: unknown) =>
    new CallFailure(
      'unavailable',
      `"${tool}" cannot be checked yet: ${(err as Error).message}. Call it again in a moment.`,
    ),

  /** Route: `matrix_invoke` towards a reserved subject. */
  reservedTarget: (subject: string, target: string) =>
    new CallFailure(
      'forbidden',
      `${MATRIX_INVOKE} may not call ${subject}: ${target} is reserved. Choose another mount.`,
    ),

  /** Route: `matrix_invoke` outside the context's `allowTargets`. */
  targetNotAllowed: (subject: string, allowed: readonly string[]) =>
    new CallFailure(
      'forbidden',
      `${MATRIX_INVOKE} may not call ${subject}: this session allows only ${allowed.join(', ') || 'no targets'}.`,
    ),

  /** Approval: not approved (rejected, no approver, no answer in time). */
  approvalDenied: (tool: string, reason: string) =>
    new CallFailure(
      'approval_denied',
      `The call to "${tool}" was not made: ${reason}. Do not retry it unchanged; ask the user how to proceed.`,
    ),

  /** Forward: the target's bound of calls in flight is reached. */
  tooManyInFlight: (tool: string, target: string, inFlight: number) =>
    new CallFailure(
      'unavailable',
      `${target} already has ${inFlight} calls in flight, the most allowed; try "${tool}" again in a moment.`,
    ),
  tooManyOfYours: (tool: string, target: string, inFlight: number) =>
    new CallFailure(
      'unavailable',
      `you already have ${inFlight} calls in flight to ${target}, the most one caller may have; try "${tool}" again when some have returned.`,
    ),

  /** Forward: the target's replies in flight filled its budget of bytes until the call's deadline. */
  repliesInFlight: (tool: string, target: string, replyBytes: number, bound: ReplyBound | undefined) =>
    new CallFailure(
      'timeout',
      `"${tool}" was not sent, nothing ran: ${
        bound === 'total'
          ? `the replies in flight of all targets together filled their budget of bytes (each call to a target with no reply yet counts as max_payload)`
          : `${target}'s replies are taken to be ~${Math.round(replyBytes / 1024)} KiB each, and enough of them were in flight to fill ${bound === 'share' ? 'your share of its budget of bytes' : 'its budget of bytes'}`
      } until the call's deadline passed; try again when some have returned.`,
    ),

  /** Approve or forward: its caller cancelled the call (a task's `$cancel`, an MCP `notifications/cancelled`). */
  cancelled: (tool: string, sent: boolean) =>
    new CallFailure(
      'cancelled',
      sent
        ? `The call to "${tool}" was cancelled while its target worked; the target was told to stop, and may have done part of the work. Check its effect before you call it again.`
        : `The call to "${tool}" was cancelled before it was sent; nothing ran.`,
    ),

  /** Tasks: a tool whose `execution.taskSupport` is `required`, called as a plain call. */
  taskRequired: (tool: string) =>
    new CallFailure(
      'bad_request',
      `"${tool}" runs only as a task: call it again with task (MCP: tools/call with a task field).`,
    ),

  /** Tasks: a tool whose `execution.taskSupport` is `forbidden`, called as a task. */
  taskForbidden: (tool: string) =>
    new CallFailure('bad_request', `"${tool}" does not run as a task: call it again without task.`),

  /** Tasks: this service runs none. */
  tasksOff: (tool: string) =>
    new CallFailure('unavailable', `This service does not run tasks; call "${tool}" again without task.`),

  /** Tasks: the principal holds the most live tasks allowed. */
  tooManyTasks: (tool: string, live: number) =>
    new CallFailure(
      'unavailable',
      `You already have ${live} tasks running, the most one caller may have; "${tool}" was not started. Wait for some to finish (system.tasks.$list), or cancel one, then call again.`,
    ),

  /**
   * Tasks: the principal's share of the task store is full (records or bytes, finished tasks
   * included). It frees itself as finished tasks are removed, so the model is told to wait.
   */
  taskShareFull: (tool: string, kept: { records: number; bytes: number }, bounds: { records: number; bytes: number }) =>
    new CallFailure(
      'unavailable',
      `Your tasks already keep ${kept.records} records and ${kept.bytes} bytes (at most ${bounds.records} records and ${bounds.bytes} bytes, finished tasks included); "${tool}" was not started. Finished tasks are removed ttlMs after their creation (10 minutes unless the call asked longer): fetch the results you need (system.tasks.$result), cancel tasks you no longer need, and call again once older tasks are gone; or call without task.`,
    ),

  /** Tasks: the call alone is larger than all a principal's tasks may keep. */
  taskTooLarge: (tool: string, bytes: number, most: number) =>
    new CallFailure(
      'payload_too_large',
      `"${tool}" as a task would keep ${bytes} bytes, more than all of one caller's tasks may keep (${most} bytes); it was not started. Send smaller arguments, or call it without task.`,
    ),

  /** Tasks: the task store as a whole is near full (many callers); tasks already there can still end. */
  tasksFull: (tool: string) =>
    new CallFailure(
      'unavailable',
      `The task store is full right now; "${tool}" was not started. Try again in a few minutes, or call it without task.`,
    ),

  /**
   * The grant the call was made under was revoked or expired before it was sent (it waited for
   * approval, or as a task).
   */
  grantLapsed: (tool: string, why: string) =>
    new CallFailure(
      'forbidden',
      `The grant this call was made under no longer holds (${why.slice(0, 300)}): "${tool}" was not sent; nothing ran. Ask for a new grant, then call again.`,
    ),

  /** Tasks: the instance running it died after the request went to the target. */
  mayHaveRun: (tool: string) =>
    new CallFailure(
      'unavailable',
      `The service running "${tool}" stopped after the call was sent to its target, so it may have run: check before asking again.`,
    ),

  /**
   * Tasks: the call ended (sent, and its target answered) but its result could not be written
   * to the task's record; the record says so rather than leaving the task to a takeover's "may
   * have run".
   */
  resultNotKept: (tool: string, answered: boolean, err: unknown) =>
    new CallFailure(
      'internal',
      `"${tool}" ${answered ? 'ran and its target answered' : 'ended'}, but the service could not keep its result (${(err instanceof Error ? err.message : String(err)).slice(0, 200)}), so it is lost: check its effect before calling again, or call it without a task.`,
      { cause: err },
    ),

  /** Shape: a reply that cannot be turned into text. */
  unshowableReply: (tool: string, err: unknown) =>
    new CallFailure(
      'internal',
      `"${tool}" answered with a reply that cannot be shown as text (${(err as Error).message}); its service must fix it. Use another tool.`,
    ),

  /** Anywhere: a failure the dispatcher did not foresee (a defect of its own). */
  unexpected: (tool: string, err: unknown) =>
    new CallFailure('internal', `"${tool}" failed unexpectedly in the dispatcher; try again, or use another tool.`, {
      cause: err,
    }),
};

/** Where a forwarded call went, for the messages of its failures: its route's subject, timeout and `sentOnce`. */
export type ForwardedTo = Pick<Route, 'subject' | 'timeoutMs' | 'sentOnce'>;

/** Forward: how a failed request to the target reads to the model. */
export function targetFailed(tool: string, to: ForwardedTo, err: unknown): CallFailure {
  if (!(err instanceof MatrixError)) return failure.unexpected(tool, err);
  const cause = { cause: err };
  if (err instanceof UnsendableRequestError) {
    return new CallFailure(
      'bad_request',
      `The call to "${tool}" was not sent: ${err.message}. Fix the arguments and call again.`,
      cause,
    );
  }
  if (err instanceof NoRespondersError && to.sentOnce) {
    // "No responders" may come from a target that did the work: it was not sent again.
    return new CallFailure(
      'unavailable',
      `"${tool}" got no answer (${to.subject} said it has no responders), so it may or may not have run. Check its effect before you ask to run it again.`,
      cause,
    );
  }
  if (err instanceof TargetFloodError) {
    return new CallFailure(
      'unavailable',
      `"${tool}" was stopped: ${err.message}. Its target misbehaves; it was told to cancel the call. Use another tool, or tell whoever runs ${err.details?.target ?? to.subject}.`,
      cause,
    );
  }
  if (err instanceof ReplyShapeError) {
    return new CallFailure(
      'internal',
      `"${tool}" failed: ${err.message}. Its target misbehaves; the call may have run, and was not sent again. Use another tool, or tell whoever runs ${to.subject}.`,
      cause,
    );
  }
  if (err instanceof NoRespondersError) {
    return new CallFailure(
      'unavailable',
      `No service is answering "${tool}" right now (${to.subject} has no responders). Try again later, or use another tool.`,
      cause,
    );
  }
  switch (err.code) {
    case ErrorCode.Timeout:
      return new CallFailure(
        'timeout',
        `"${tool}" did not answer in time (${to.subject}, at most ${to.timeoutMs} ms or the caller's deadline). It may still be running: check its effect before repeating a call that changes things.`,
        cause,
      );
    case ErrorCode.Unavailable:
      return new CallFailure(
        'unavailable',
        `"${tool}" is unavailable: ${err.message} (said ${to.subject}). Try again later, or use another tool.`,
        cause,
      );
    case ErrorCode.BadRequest:
      return new CallFailure(
        'bad_request',
        `"${tool}" refused its arguments: ${err.message}. Fix them and call again.`,
        cause,
      );
    default:
      return new CallFailure(err.code, `"${tool}" failed (${err.code}): ${err.message}`, cause);
  }
}

/** `/a/0/b` → `a[0].b`: how a model names an argument. */
export function argumentName(pointer: string): string {
  if (pointer === '') return 'the arguments';
  const name = pointer
    .slice(1)
    .split('/')
    .map((t) => t.replaceAll('~1', '/').replaceAll('~0', '~'))
    .map((t, i) => (/^\d+$/.test(t) ? `[${t}]` : i === 0 ? t : `.${t}`))
    .join('');
  return `argument "${name}"`;
}

/** One sentence per violation, then what to do. */
export function argumentsMessage(tool: string, violations: readonly Violation[]): string {
  const listed = describeViolations(violations, { shown: 20, name: argumentName });
  return `Invalid arguments for "${tool}": ${listed}. Fix the arguments and call "${tool}" again.`;
}
