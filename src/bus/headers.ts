/**
 * The headers of a request and of a reply (PROTOCOL sections 2 and 3): their names, the context
 * headers read from a request's raw block in one pass (bounded, names in any case) and written
 * onto every downstream request, and what a reply's headers say (status, service error, content
 * type, progress).
 */
import { randomFillSync } from 'node:crypto';
import { InvalidArgumentError, type Msg, type MsgHdrs, MsgHdrsImpl } from '@nats-io/nats-core';
import { JSON_CONTENT_TYPE } from './codec.js';
import type { CallContext } from './context.js';
import { BadRequestError } from './errors.js';

/** Header names, spelt as they travel. */
export const Header = {
  TraceParent: 'traceparent',
  Deadline: 'Matrix-Deadline',
  Session: 'Matrix-Session',
  Principal: 'Matrix-Principal',
  Grant: 'Matrix-Grant',
  ReadSessions: 'Matrix-Read-Sessions',
  CallId: 'Matrix-Call-Id',
  Progress: 'Matrix-Progress',
  ContentType: 'Content-Type',
  ServiceErrorCode: 'Nats-Service-Error-Code',
  ServiceError: 'Nats-Service-Error',
  /** What nats-server attests of a request's sender across a service import with `share: true` (ClientInfo JSON). */
  RequestInfo: 'Nats-Request-Info',
} as const;

/** A W3C `traceparent`, nothing before or after it: version, then the groups trace id, span id, flags. */
export const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
/** A W3C trace id: 32 lowercase hex digits. */
export const TRACE_ID = /^[0-9a-f]{32}$/;

/** Header names in lower case, as a request's are compared. */
const lower = {
  TraceParent: Header.TraceParent.toLowerCase(),
  Session: Header.Session.toLowerCase(),
  Principal: Header.Principal.toLowerCase(),
  Deadline: Header.Deadline.toLowerCase(),
  Grant: Header.Grant.toLowerCase(),
  ReadSessions: Header.ReadSessions.toLowerCase(),
  CallId: Header.CallId.toLowerCase(),
  Progress: Header.Progress.toLowerCase(),
  ContentType: Header.ContentType.toLowerCase(),
  RequestInfo: Header.RequestInfo.toLowerCase(),
};

/**
 * What the headers of a request say: its context, whether its body is JSON, whether its caller
 * takes progress reports.
 */
export interface RequestHeaders {
  context: CallContext;
  json: boolean;
  /** `Matrix-Progress: 1` on a request: its caller takes progress reports (PROTOCOL 10). */
  progress: boolean;
  /**
   * The `Nats-Request-Info` value of the block's last line, unparsed, and only when that line is
   * one: where the request crossed a service import, nats-server appended it there (it drops the
   * first such header a client set, and joins its own to a block a client left unterminated,
   * which makes that line no ClientInfo). Inside one account it is whatever the sender set: only
   * a grant check that expects it reads it. Undefined when read from a map of headers.
   */
  requestInfo: string | undefined;
}

/** Longest `Matrix-Grant` a request may carry, in characters (a grant is a few hundred). */
export const MAX_GRANT_LENGTH = 16_384;

/**
 * Longest value of each context header a request may carry, in characters: identities and
 * grants are short, and every one of them lands in audit events and downstream headers, so an
 * unbounded one would let a caller bloat the audit batches of everyone.
 */
export const HEADER_LIMITS = {
  [lower.Session]: 256,
  [lower.Principal]: 256,
  [lower.Grant]: MAX_GRANT_LENGTH,
  [lower.ReadSessions]: 8_448,
  [lower.CallId]: 256,
} as const satisfies Record<string, number>;

/**
 * Reads the headers of a request in one pass, names in any case. A malformed `Matrix-Deadline`
 * or a context value over its limit is a bad request; a `traceparent` that is not W3C trace
 * context is ignored, as W3C says, and a new trace starts downstream. A name given more than
 * once: its first usable value counts, but for `Nats-Request-Info`, whose last value is the
 * server's. (A mount reads the raw block instead: `readHeaderBlock`.)
 */
export function readRequestHeaders(h: MsgHdrs | undefined): RequestHeaders {
  const read = emptyRequestHeaders();
  if (h === undefined) return read;
  for (const [name, values] of h) for (const value of values) readHeader(read, name, value);
  // A map of names keeps no line order: which value is the server's cannot be told here.
  read.requestInfo = undefined;
  return read;
}

/**
 * What no header says yet: every context field there from the start (undefined), so each
 * request's context has one shape whatever headers it carries and in whatever order.
 */
export function emptyRequestHeaders(): RequestHeaders {
  return {
    context: {
      traceparent: undefined,
      deadline: undefined,
      session: undefined,
      principal: undefined,
      grant: undefined,
      readSessions: undefined,
      callId: undefined,
    },
    json: false,
    progress: false,
    requestInfo: undefined,
  };
}

/**
 * The names `readHeader` reads, by their lower-case spelling and as the protocol spells them (what
 * this package and most callers send): those two are found without lower-casing the name.
 */
const READ_NAMES = new Map<string, string>(
  Object.values(lower).flatMap((key) => {
    const spelt = Object.values(Header).find((name) => name.toLowerCase() === key) ?? key;
    return [
      [key, key],
      [spelt, key],
    ];
  }),
);

/**
 * Lengths of the names `readHeader` reads: any other name is passed over without lower-casing it.
 */
const READ_NAME_LENGTHS = new Set(Object.values(lower).map((name) => name.length));

/** The lower-case name of a header `readHeader` reads, or undefined for any other. */
function readName(name: string): string | undefined {
  const key = READ_NAMES.get(name);
  if (key !== undefined || !READ_NAME_LENGTHS.has(name.length)) return key;
  return READ_NAMES.get(name.toLowerCase());
}

/** Takes one header line (`name: value`, value trimmed) into what a request's headers say. */
export function readHeader(read: RequestHeaders, name: string, value: string): void {
  if (!value) return;
  const key = readName(name);
  if (key === undefined) return;
  const limit = HEADER_LIMITS[key as keyof typeof HEADER_LIMITS];
  if (limit !== undefined && value.length > limit) throw headerTooLong(name, limit);
  const context = read.context;
  switch (key) {
    case lower.TraceParent:
      if (context.traceparent === undefined && TRACEPARENT.test(value)) context.traceparent = value;
      break;
    case lower.Session:
      context.session ??= value;
      break;
    case lower.Principal:
      context.principal ??= value;
      break;
    case lower.Deadline:
      context.deadline ??= deadlineHeader(value);
      break;
    case lower.Grant:
      context.grant ??= value;
      break;
    case lower.ReadSessions:
      context.readSessions ??= value;
      break;
    case lower.CallId:
      context.callId ??= value;
      break;
    case lower.ContentType:
      read.json ||= value.startsWith(JSON_CONTENT_TYPE);
      break;
    case lower.Progress:
      read.progress ||= value === '1';
      break;
    case lower.RequestInfo:
      read.requestInfo = value;
      break;
  }
}

/** Reads the context headers of a request; a malformed `Matrix-Deadline` is a bad request. */
export function readContext(h: MsgHdrs | undefined): CallContext {
  return readRequestHeaders(h).context;
}

function headerTooLong(name: string, limit: number): BadRequestError {
  return new BadRequestError(`header ${name} is longer than ${limit} characters`, {
    details: { violations: [{ path: '', message: `header ${name} is over ${limit} characters` }] },
  });
}

function deadlineHeader(value: string): number {
  const ms = Number(value);
  if (!Number.isSafeInteger(ms) || ms <= 0) {
    throw new BadRequestError(`header ${Header.Deadline} must be a Unix time in milliseconds, got '${value}'`, {
      details: { violations: [{ path: '', message: `header ${Header.Deadline} is not a Unix time in ms` }] },
    });
  }
  return ms;
}

/**
 * Headers this package sends. nats.js checks and canonicalises a name on every `set` and
 * encodes the block with a `TextEncoder` on every publish, ~1.5 µs for two headers (most of
 * it the encoder, slow on short strings); here the names are the protocol's constants,
 * values are checked as nats.js checks them, and `Buffer.from` encodes (~0.3 µs).
 */
export class OutgoingHeaders extends MsgHdrsImpl {
  /** Sets one of the protocol's headers; throws if the value holds CR or LF. */
  put(name: (typeof Header)[keyof typeof Header], value: string): this {
    if (value.includes('\n') || value.includes('\r'))
      throw InvalidArgumentError.format('header', 'values cannot contain \\r or \\n');
    this.headers.set(name, [value.trim()]);
    return this;
  }

  override encode(): Uint8Array {
    return Buffer.from(this.toString());
  }
}

/**
 * Writes the context into headers (creating them when needed); returns them, or undefined if
 * none. `deadline`, when given, replaces the context's own (the earlier one a client computed).
 */
export function writeContext(ctx: CallContext | undefined, h?: MsgHdrs, deadline = ctx?.deadline): MsgHdrs | undefined {
  if (ctx === undefined) return h;
  let out = h;
  if (ctx.traceparent !== undefined) out = putHeader(out, Header.TraceParent, ctx.traceparent);
  if (deadline !== undefined) out = putHeader(out, Header.Deadline, String(deadline));
  if (ctx.session !== undefined) out = putHeader(out, Header.Session, ctx.session);
  if (ctx.principal !== undefined) out = putHeader(out, Header.Principal, ctx.principal);
  if (ctx.grant !== undefined) out = putHeader(out, Header.Grant, ctx.grant);
  if (ctx.readSessions !== undefined) out = putHeader(out, Header.ReadSessions, ctx.readSessions);
  if (ctx.callId !== undefined) out = putHeader(out, Header.CallId, ctx.callId);
  return out;
}

/**
 * Sets one of the protocol's headers: on new `OutgoingHeaders` when there are none, else on
 * those given.
 */
export function putHeader(h: MsgHdrs | undefined, name: (typeof Header)[keyof typeof Header], value: string): MsgHdrs {
  if (h === undefined) return new OutgoingHeaders().put(name, value);
  if (h instanceof OutgoingHeaders) return h.put(name, value);
  h.set(name, value);
  return h;
}

/*
 * A request's header block, read by the mount in one pass over its raw bytes. nats.js's
 * `msg.headers` parses the block with a scan of every name seen so far for each new one: quadratic
 * in the number of names, so a block of ~60,000 distinct names, which any caller may send within
 * `max_payload`, would hold a mount's event loop for ~22 s. Here each line costs its own length
 * once, and only the protocol's headers are kept.
 */

/** A header name as nats.js accepts one: printable ASCII but the colon. */
const HEADER_NAME = /^[!-9;-~]*$/;

/**
 * Most bytes of a request's header block. Every header the protocol reads, at its longest (a
 * grant of 16 KiB, read sessions of 8 KiB, the server's `Nats-Request-Info`), fits with room;
 * a longer block is refused from its length, before a byte of it is read.
 */
export const MAX_REQUEST_HEADER_BYTES = 32 * 1024;

/** Most lines of a request's header block: the protocol reads about a dozen headers. */
export const MAX_REQUEST_HEADER_LINES = 64;

/**
 * What a request's headers say. Read from the raw block where nats-core keeps it (3.x: `_msg.hdr`
 * is its length, `_rdata` the block and body); through `msg.headers` on any other nats-core.
 * A block that cannot be read, or is longer than the bounds above, is the caller's bad request.
 */
export function requestHeadersOf(msg: Msg): RequestHeaders {
  const raw = rawHeaderBlock(msg, MAX_REQUEST_HEADER_BYTES);
  if (raw === null) return emptyRequestHeaders();
  if (raw !== undefined) return readHeaderBlock(raw);
  try {
    return readRequestHeaders(msg.headers);
  } catch (err) {
    if (err instanceof BadRequestError) throw err;
    throw unreadable((err as Error).message);
  }
}

/**
 * The header block as text; null when the message has none; undefined when this nats-core keeps
 * it elsewhere. A block of more than `maxBytes` is a bad request.
 */
export function rawHeaderBlock(msg: Msg, maxBytes = Number.POSITIVE_INFINITY): string | null | undefined {
  const impl = msg as unknown as { _msg?: { hdr?: unknown }; _rdata?: unknown };
  const length = impl._msg?.hdr;
  if (typeof length !== 'number') return undefined;
  if (length <= 0) return null;
  if (length > maxBytes) throw unreadable(`the block is ${length} bytes, more than ${maxBytes}`);
  const data = impl._rdata;
  if (!(data instanceof Uint8Array) || data.length < length) return undefined;
  return Buffer.from(data.buffer, data.byteOffset, length).toString('utf8');
}

/**
 * Reads a header block (`NATS/1.0…\r\nName: value\r\n…\r\n\r\n`) as nats.js would, line by
 * line: a line without a colon is passed over; a name that is not printable ASCII, or a line
 * holding a lone CR or LF, makes the block unreadable (a bad request), as it does for nats.js.
 */
export function readHeaderBlock(block: string): RequestHeaders {
  const read = emptyRequestHeaders();
  let at = block.indexOf('\r\n');
  if (at < 0) return read;
  let lines = 0;
  for (at += 2; at < block.length; ) {
    let end = block.indexOf('\r\n', at);
    if (end < 0) end = block.length;
    if (end > at) {
      if (++lines > MAX_REQUEST_HEADER_LINES) throw unreadable(`it has more than ${MAX_REQUEST_HEADER_LINES} lines`);
      readLine(read, block, at, end);
    }
    at = end + 2;
  }
  return read;
}

/** Reads the line `block[at, end)` in place: only its name and value are sliced out. */
function readLine(read: RequestHeaders, block: string, at: number, end: number): void {
  // Only the last line may be the server's Nats-Request-Info: any line after one unsets it.
  read.requestInfo = undefined;
  const colon = block.indexOf(':', at);
  if (colon < 0 || colon >= end) return;
  // The next CR or LF is the line's own end unless the line holds a lone one.
  const cr = block.indexOf('\r', at);
  const lf = block.indexOf('\n', at);
  if ((cr >= 0 && cr < end) || (lf >= 0 && lf < end)) throw unreadable('values cannot contain \\r or \\n');
  const name = block.slice(at, colon);
  if (!READ_NAMES.has(name) && !HEADER_NAME.test(name))
    throw unreadable(`'${name.slice(0, 64)}' is not a valid header name`);
  readHeader(read, name, block.slice(colon + 1, end).trim());
}

function unreadable(why: string): BadRequestError {
  return new BadRequestError(`the request's headers cannot be read: ${why}`);
}

/** What a reply's headers say that a caller reads (PROTOCOL section 2). */
export interface ReplyHeaders {
  /** The status of the block's first line (503: no responders), else 0. */
  code: number;
  serviceErrorCode?: string;
  serviceError?: string;
  contentType?: string;
  /** `Matrix-Progress: 1`: a progress report before the reply (PROTOCOL 10), never the reply. */
  progress?: boolean;
}

const SERVICE_ERROR_CODE = 'Nats-Service-Error-Code';
const SERVICE_ERROR = 'Nats-Service-Error';
const CONTENT_TYPE = 'content-type';
const PROGRESS = 'Matrix-Progress';

/**
 * A reply's headers, read as `requestHeadersOf` reads a request's and for the same reason (a
 * target that answers with 60,000 header names must not hold its caller): the service error
 * headers by exact name, `Content-Type` in any case, each its first value; undefined when the
 * reply has none.
 */
export function replyHeadersOf(msg: Msg): ReplyHeaders | undefined {
  const raw = rawHeaderBlock(msg);
  if (raw === null) return undefined;
  if (raw !== undefined) return readReplyBlock(raw);
  const h = msg.headers;
  if (h === undefined) return undefined;
  const read: ReplyHeaders = { code: h.code };
  for (const [name, values] of h) for (const value of values) readReplyHeader(read, name, value);
  return read;
}

/** Reads a reply's header block line by line; lines it cannot read are passed over. */
export function readReplyBlock(block: string): ReplyHeaders {
  let at = block.indexOf('\r\n');
  const status = (at < 0 ? block : block.slice(0, at)).replace('NATS/1.0', '').trim();
  const read: ReplyHeaders = { code: Number.parseInt(status, 10) || 0 };
  if (at < 0) return read;
  for (at += 2; at < block.length; ) {
    let end = block.indexOf('\r\n', at);
    if (end < 0) end = block.length;
    const colon = block.slice(at, end).indexOf(':');
    if (colon > 0) readReplyHeader(read, block.slice(at, at + colon), block.slice(at + colon + 1, end).trim());
    at = end + 2;
  }
  return read;
}

function readReplyHeader(read: ReplyHeaders, name: string, value: string): void {
  if (name === SERVICE_ERROR_CODE) read.serviceErrorCode ??= value;
  else if (name === SERVICE_ERROR) read.serviceError ??= value;
  else if (name === PROGRESS) read.progress ||= value === '1';
  else if (name.length === CONTENT_TYPE.length && name.toLowerCase() === CONTENT_TYPE) read.contentType ??= value;
}

/** The trace id of a `traceparent`, or undefined when it is not W3C-shaped. */
export function traceIdOf(traceparent: string | undefined): string | undefined {
  if (traceparent === undefined) return undefined;
  return TRACEPARENT.exec(traceparent)?.[1];
}

// Random bytes are drawn 4 KiB at a time and made hex at once: one syscall and one encoding per
// 170 trace ids, each then two slices of a flat string (hex of 24 bytes a call cost ~0.1 µs more).
const POOL_SIZE = 4096;
const pool = Buffer.alloc(POOL_SIZE);
let poolHex = '';
let hexOffset = 0;

/** A fresh sampled `traceparent` (a new random trace id and span id). */
export function newTraceparent(): string {
  if (hexOffset + 48 > poolHex.length) {
    randomFillSync(pool);
    poolHex = pool.toString('hex');
    hexOffset = 0;
  }
  const at = hexOffset;
  hexOffset += 48;
  return `00-${poolHex.slice(at, at + 32)}-${poolHex.slice(at + 32, at + 48)}-01`;
}

/** The earlier of a relative timeout and an absolute deadline, as an absolute deadline. */
export function deadlineOf(timeoutMs: number, callerDeadline: number | undefined, now = Date.now()): number {
  const own = now + timeoutMs;
  return callerDeadline === undefined ? own : Math.min(own, callerDeadline);
}
