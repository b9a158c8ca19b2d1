/**
 * The error model of PROTOCOL section 4: one class per failure, each with a stable wire
 * `code`, the NATS services status number, and optional `details` that cross the wire.
 */

/** The wire error codes, as they appear in `{ error: { code } }`. */
export const ErrorCode = {
  BadRequest: 'bad_request',
  NotFound: 'not_found',
  Forbidden: 'forbidden',
  Conflict: 'conflict',
  PayloadTooLarge: 'payload_too_large',
  Unavailable: 'unavailable',
  Timeout: 'timeout',
  Internal: 'internal',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** The number each code travels under in `Nats-Service-Error-Code`. */
export const errorStatus: Readonly<Record<ErrorCode, number>> = {
  bad_request: 400,
  not_found: 404,
  forbidden: 403,
  conflict: 409,
  payload_too_large: 413,
  unavailable: 503,
  timeout: 504,
  internal: 500,
};

/** One schema violation: where (a JSON Pointer into the body) and what is wrong. */
export interface Violation {
  /** JSON Pointer into the request body, `''` for the body itself. */
  path: string;
  /** What is wrong, in words a person or a model can act on. */
  message: string;
  /** The JSON Schema keyword that failed, when one did. */
  keyword?: string;
}

/** Machine-readable detail of an error; `violations` for `bad_request`. */
export interface ErrorDetails {
  /** At most 10 violations (a `bad_request`). */
  violations?: Violation[];
  /** How many violations found are not listed in `violations`. */
  moreViolations?: number;
  [key: string]: unknown;
}

/** The body of a failed op. */
export interface ErrorBody {
  error: { code: ErrorCode; message: string; details?: ErrorDetails };
}

/** Any error that has a place on the wire. */
export class MatrixError extends Error {
  override name = 'MatrixError';
  readonly code: ErrorCode;
  readonly details: ErrorDetails | undefined;

  constructor(code: ErrorCode, message: string, options?: { details?: ErrorDetails; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options?.details;
  }

  /** The number of `Nats-Service-Error-Code`. */
  get status(): number {
    return errorStatus[this.code];
  }

  /** The wire body; never a stack trace. */
  toBody(): ErrorBody {
    const error: ErrorBody['error'] = { code: this.code, message: this.message };
    if (this.details !== undefined) error.details = this.details;
    return { error };
  }
}

type ErrorOptions = { details?: ErrorDetails; cause?: unknown };

/** The body could not be decoded or does not match the op's schema. */
export class BadRequestError extends MatrixError {
  override name = 'BadRequestError';
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.BadRequest, message, options);
  }
  /** Every violation, in the order found. */
  get violations(): Violation[] {
    return this.details?.violations ?? [];
  }
}

/** An unknown context key, tool or op. */
export class NotFoundError extends MatrixError {
  override name = 'NotFoundError';
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.NotFound, message, options);
  }
}

/** Not allowed by the resolved context or by policy. */
export class ForbiddenError extends MatrixError {
  override name = 'ForbiddenError';
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.Forbidden, message, options);
  }
}

/**
 * The state does not allow it: a compare-and-set lost (`expectedRevision` does not match), a tool
 * definition held for acceptance, two contexts that claim one tool name.
 */
export class ConflictError extends MatrixError {
  override name = 'ConflictError';
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.Conflict, message, options);
  }
}

/** A request or reply over the size limit. */
export class PayloadTooLargeError extends MatrixError {
  override name = 'PayloadTooLargeError';
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.PayloadTooLarge, message, options);
  }
}

/** Nobody listens on the target subject, or the connection is gone. */
export class UnavailableError extends MatrixError {
  override name = 'UnavailableError';
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.Unavailable, message, options);
  }
}

/**
 * The request got the NATS `503` status with no body. The server sends it when nobody is
 * subscribed to the subject: the request was delivered to no one, so nothing ran and it may be
 * sent again. A target can send the same status itself, after doing the work, and the two cannot
 * be told apart, so the dispatcher sends a call again after it unless the call may be sent only
 * once (an approved one; `retryDelay`). A mount's own `503` error reply (with a body) is an
 * `UnavailableError` but not this one: that mount did receive the request.
 */
export class NoRespondersError extends UnavailableError {
  override name = 'NoRespondersError';
}

/**
 * A target sent one request more messages (progress reports, PROTOCOL 10) than a request takes
 * (`bus/reports.ts`): the request was stopped and its target is to blame. `details.target` names
 * the mount. Never sent again: the target would flood again.
 */
export class TargetFloodError extends UnavailableError {
  override name = 'TargetFloodError';
}

/**
 * The connection a request went on was lost (a disconnect: nats-server cut it, or the network)
 * before its reply came: the reply, if any, is lost with it. The request may have reached its
 * target and run. Failed at once rather than left to wait out its deadline.
 */
export class ConnectionLostError extends UnavailableError {
  override name = 'ConnectionLostError';
}

/**
 * A request this side could not send as given (a body the codec cannot encode, a header value
 * with a line break): it never left the process, and sending it again cannot help.
 */
export class UnsendableRequestError extends BadRequestError {
  override name = 'UnsendableRequestError';
}

/** The target did not answer before the deadline. */
export class TimeoutError extends MatrixError {
  override name = 'TimeoutError';
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.Timeout, message, options);
  }
}

/** Anything unexpected; its message is safe to send, its cause stays local. */
export class InternalError extends MatrixError {
  override name = 'InternalError';
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.Internal, message, options);
  }
}

/**
 * A reply (its body, or an error reply's body) whose shape is over what a reply may have
 * (codec `REPLY_SHAPE`): refused from its bytes at its first excess, never decoded. Its sender is
 * to blame, not the caller; never sent again, as the same target would answer the same.
 */
export class ReplyShapeError extends InternalError {
  override name = 'ReplyShapeError';
}

const classes: Record<ErrorCode, new (message: string, options?: ErrorOptions) => MatrixError> = {
  bad_request: BadRequestError,
  not_found: NotFoundError,
  forbidden: ForbiddenError,
  conflict: ConflictError,
  payload_too_large: PayloadTooLargeError,
  unavailable: UnavailableError,
  timeout: TimeoutError,
  internal: InternalError,
};

const codeByStatus = new Map<number, ErrorCode>(
  Object.entries(errorStatus).map(([code, status]) => [status, code as ErrorCode]),
);

/** Is `value` one of the wire error codes? */
export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(errorStatus, value);
}

/** The typed error for a wire code (what a client throws for an error reply). */
export function errorFromWire(code: ErrorCode, message: string, details?: ErrorDetails): MatrixError {
  return new classes[code](message, details === undefined ? undefined : { details });
}

/** The wire code for a `Nats-Service-Error-Code` number; unknown numbers are `internal`. */
export function codeOfStatus(status: number): ErrorCode {
  return codeByStatus.get(status) ?? ErrorCode.Internal;
}
