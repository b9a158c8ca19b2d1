/**
 * Reading a reply as PROTOCOL section 2 says: the error headers first, then the body by its
 * `Content-Type`; what cannot be read is the sender's fault.
 */
import type { Msg } from '@nats-io/nats-core';
import { decodeReply } from './codec.js';
import {
  codeOfStatus,
  type ErrorDetails,
  errorFromWire,
  InternalError,
  isErrorCode,
  NoRespondersError,
  ReplyShapeError,
} from './errors.js';
import type { ReplyHeaders } from './headers.js';

/**
 * A reply as PROTOCOL section 2 says to read one: no responders first (nobody got the request),
 * then the error headers (whatever the body holds), then the body by its `Content-Type`, else
 * MessagePack, else JSON. Throws the reply's `MatrixError`; a body nothing decodes is the
 * sender's fault, an `InternalError`, never the caller's bad request.
 */
export function readReply(msg: Msg, h: ReplyHeaders | undefined, subject: string): unknown {
  const status = h?.serviceErrorCode;
  if (h !== undefined && h.code === 503 && !status && msg.data.length === 0) {
    throw new NoRespondersError(`no responders for ${subject}: nothing serves that op`);
  }
  const contentType = h?.contentType;
  if (status)
    return throwWireError(status, h?.serviceError ?? '', decodeErrorBody(msg.data, contentType, subject), subject);
  try {
    return decodeReply(msg.data, contentType);
  } catch (err) {
    if (err instanceof ReplyShapeError) throw refusedShape(err, subject);
    throw new InternalError(`${subject} answered with a body that cannot be read: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/**
 * The body of an error reply, when it decodes at all: micro services put anything there,
 * or nothing. One over a reply's shape is refused as a reply is (`ReplyShapeError`): its sender
 * built it to be expensive to read, and the caller is told so rather than given the headers'
 * word.
 */
function decodeErrorBody(data: Uint8Array, contentType: string | undefined, subject: string): unknown {
  try {
    return decodeReply(data, contentType);
  } catch (err) {
    if (err instanceof ReplyShapeError) throw refusedShape(err, subject);
    return undefined;
  }
}

/** A reply refused for its shape, naming the subject that sent it (its target is to blame). */
function refusedShape(err: ReplyShapeError, subject: string): ReplyShapeError {
  return new ReplyShapeError(`${subject} answered a reply refused unread for its shape: ${err.message}`, {
    details: err.details,
    cause: err,
  });
}

/**
 * Throws the typed error of an error reply: code and message from `{error}` when the body has them,
 * else from the headers.
 */
function throwWireError(status: string, headerMessage: string, body: unknown, subject: string): never {
  const error = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined)?.error;
  const code = isErrorCode(error?.code) ? error.code : codeOfStatus(Number(status));
  const message =
    typeof error?.message === 'string' ? error.message : headerMessage || `${subject} failed with ${status}`;
  const details =
    error?.details !== null && typeof error?.details === 'object' ? (error.details as ErrorDetails) : undefined;
  throw errorFromWire(code, message, details);
}
