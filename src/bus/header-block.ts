/**
 * A request's header block, read by the mount in one pass over its raw bytes. nats.js's
 * `msg.headers` parses the block with a scan of every name seen so far for each new one:
 * quadratic in the number of names, so a block of ~60,000 distinct names, which any caller may
 * send within `max_payload`, held a mount's event loop for ~22 s. Here each line costs its own
 * length once, and only the protocol's headers are kept.
 */
import type { Msg } from '@nats-io/nats-core';
import { emptyRequestHeaders, type RequestHeaders, readHeader, readRequestHeaders } from './context.js';
import { BadRequestError } from './errors.js';

/** A header name as nats.js accepts one: printable ASCII but the colon. */
const HEADER_NAME = /^[!-9;-~]*$/;

/**
 * What a request's headers say. Read from the raw block where nats-core keeps it (3.x: `_msg.hdr`
 * is its length, `_rdata` the block and body); through `msg.headers` on any other nats-core.
 * A block that cannot be read is the caller's bad request.
 */
export function requestHeadersOf(msg: Msg): RequestHeaders {
  const raw = rawHeaderBlock(msg);
  if (raw === null) return emptyRequestHeaders();
  if (raw !== undefined) return readHeaderBlock(raw);
  try {
    return readRequestHeaders(msg.headers);
  } catch (err) {
    if (err instanceof BadRequestError) throw err;
    throw unreadable((err as Error).message);
  }
}

/** The header block as text; null when the message has none; undefined when this nats-core keeps it elsewhere. */
export function rawHeaderBlock(msg: Msg): string | null | undefined {
  const impl = msg as unknown as { _msg?: { hdr?: unknown }; _rdata?: unknown };
  const length = impl._msg?.hdr;
  if (typeof length !== 'number') return undefined;
  if (length <= 0) return null;
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
  for (at += 2; at < block.length; ) {
    let end = block.indexOf('\r\n', at);
    if (end < 0) end = block.length;
    if (end > at) readLine(read, block.slice(at, end));
    at = end + 2;
  }
  return read;
}

function readLine(read: RequestHeaders, line: string): void {
  const colon = line.indexOf(':');
  if (colon < 0) return;
  if (line.includes('\n') || line.includes('\r')) throw unreadable('values cannot contain \\r or \\n');
  const name = line.slice(0, colon);
  if (!HEADER_NAME.test(name)) throw unreadable(`'${name.slice(0, 64)}' is not a valid header name`);
  readHeader(read, name, line.slice(colon + 1).trim());
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
