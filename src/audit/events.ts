/**
 * The audit trail's event: the event of one call, as published on `system.dispatcher.events.call`
 * and stored in the trail, the summary of counted refusals, and the MessagePack of a batch of
 * them, both ways: the one batch parser every reader of `system.dispatcher.events.call` uses (the
 * in-process watchers, the trail, the index, the in-memory traces), and the encoder, written by
 * hand. The generic encoder spends ~1.7 µs an event, most of it encoding the same dozen key names
 * again; this one copies each key's bytes from a table and writes each value directly. The bytes
 * decode to what the generic encoder's would (a test holds the two together).
 */
import { decodeBody } from '../bus/codec.js';
import { traceIdOf } from '../bus/headers.js';

/** The audit event of one call, on `system.dispatcher.events.call`. */
export interface CallEvent {
  callId: string;
  name: string;
  target?: string;
  op?: string;
  session?: string;
  principal?: string;
  /** W3C trace context of the call; its trace id is characters 3–34. */
  traceparent?: string;
  /** `cancelled`: its caller stopped it (a task's `$cancel`, an MCP `notifications/cancelled`). */
  outcome: 'ok' | 'error' | 'cancelled';
  code?: string;
  durationMs: number;
  /** Requests sent to the target (0 when it was never called). */
  attempts?: number;
  /** SHA-256 (hex, all 64 digits) of the arguments’ JSON text; never the arguments themselves. */
  argumentsDigest?: string;
  /** Size of the arguments' JSON text. */
  argumentsBytes?: number;
  /** ISO 8601 time the call ended. */
  at: string;
  /** On a call refused for its grant: which check the grant failed (`details.grant`: `missing`, `expired`, …). */
  grantFailure?: string;
  /**
   * On a call refused for its grant: the grant's `sub` when a trusted issuer's signature on it
   * verified (it expired, is not valid yet, or its claims were refused). Whom the issuer named,
   * not proof of who sent it: anyone holding an expired grant can send it.
   */
  grantSubject?: string;
  /** On a call a person was asked about: its pending approval's id (PROTOCOL 8). */
  approvalId?: string;
  /** On an approved gated call: who approved it (a person's principal, `policy`, `terminal`). */
  approvedBy?: string;
  /** On a rejected gated call: who rejected it. */
  rejectedBy?: string;
  /** On a call a person was asked about: how long it waited for the answer, in ms. */
  approvalWaitMs?: number;
  /** Only on a summary event (name `(refusals)`): refusals without a valid grant counted, not stored one by one. */
  refused?: RefusalSummary;
  /**
   * Only on the event of a change to a hosted MCP server's definitions (no call's: PROTOCOL 12),
   * whose `name` is the tool's name as agents see it and `target` the server's mount.
   */
  definition?: DefinitionChange;
}

/** What a definition event says happened to a tool's definition (PROTOCOL 12). */
export const DEFINITION_CHANGES = ['added', 'changed', 'removed', 'held', 'accepted'] as const;

/**
 * One change to the pinned definitions of a hosted MCP server (PROTOCOL 12): a definition that
 * differs from the accepted one was held, accepted (by an operator, or at once with
 * `onChange: "accept"`), or a tool left.
 */
export interface DefinitionChange {
  /** The server's name in its `mcpServers` file. */
  server: string;
  /** The tool's name as the server lists it. */
  tool: string;
  change: (typeof DEFINITION_CHANGES)[number];
  /** SHA-256 (hex) of the canonical JSON of the accepted definition before; absent for a new tool. */
  before?: string;
  /** SHA-256 (hex) of the definition after; absent for a removed tool. */
  after?: string;
}

/**
 * Refusals of callers without a valid grant past the dispatcher's rate of stored refusals
 * (PROTOCOL 8): counted, and told in one summary event per interval, so none goes untold.
 */
export interface RefusalSummary {
  /** How many refusals this summary stands for; none of them has an event of its own. */
  count: number;
  /** Of them, how many by reason: the grant's failure (`missing`, `bad_signature`, …), else the error code. */
  reasons: Record<string, number>;
  /** Tool names they named, first seen first, at most 8, each cut to 32 characters. */
  tools: string[];
  /** Of them, how many named a tool not in `tools`. */
  otherTools: number;
  /** ISO 8601 time of the first refusal counted. */
  since: string;
}

/**
 * A call's event at its start: every field present (so every event has one object shape), none
 * filled in but its id and name.
 */
export function newCallEvent(callId: string, name: string): CallEvent {
  return {
    callId,
    name,
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
    grantFailure: undefined,
    grantSubject: undefined,
    approvalId: undefined,
    approvedBy: undefined,
    rejectedBy: undefined,
    approvalWaitMs: undefined,
    refused: undefined,
    definition: undefined,
  };
}

/** The MessagePack bytes of each field's name; a field added to `CallEvent` must be added here. */
const KEY = {
  callId: key('callId'),
  name: key('name'),
  target: key('target'),
  op: key('op'),
  session: key('session'),
  principal: key('principal'),
  traceparent: key('traceparent'),
  outcome: key('outcome'),
  code: key('code'),
  durationMs: key('durationMs'),
  attempts: key('attempts'),
  argumentsDigest: key('argumentsDigest'),
  argumentsBytes: key('argumentsBytes'),
  at: key('at'),
  grantFailure: key('grantFailure'),
  grantSubject: key('grantSubject'),
  approvalId: key('approvalId'),
  approvedBy: key('approvedBy'),
  rejectedBy: key('rejectedBy'),
  approvalWaitMs: key('approvalWaitMs'),
  refused: key('refused'),
  definition: key('definition'),
} satisfies Record<keyof CallEvent, Uint8Array>;

function key(name: string): Uint8Array {
  return Uint8Array.from([0xa0 | name.length, ...Buffer.from(name)]);
}

// Buffers, not bare Uint8Arrays, for `Buffer#write`: a string of 16 characters or more goes into
// the buffer in one call, 2-4 times as fast as a loop over its characters.
let buf = Buffer.alloc(64 * 1024);
let view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
let pos = 0;

/** Encodes events as one MessagePack array of maps; fields that are undefined are left out. */
export function encodeCallEvents(events: readonly CallEvent[]): Uint8Array {
  pos = 0;
  arrayHeader(events.length);
  for (const event of events) writeEvent(event);
  return new Uint8Array(buf.subarray(0, pos)); // a copy: a Buffer's slice would be a view
}

/** Room at the start of an `EventBatch` for its array header (array 16: up to 65,535 events). */
const BATCH_HEADER = 3;

/**
 * Call events encoded as they come, into one MessagePack array (the bytes `encodeCallEvents`
 * makes of the same events): a batch holds bytes, not the events, so an event is garbage once
 * its call ends. Events held as objects until their batch was published lived through one or
 * two scavenges and were promoted, which cost the service more collector time than encoding
 * them (`bench/RESULTS.md`, notes of 2026-12-04).
 */
export class EventBatch {
  private bytes = Buffer.alloc(64 * 1024);
  private view = new DataView(this.bytes.buffer, this.bytes.byteOffset, this.bytes.byteLength);
  private end = BATCH_HEADER;
  private last = BATCH_HEADER;
  /** Events in the batch. */
  count = 0;

  /** Bytes of the batch's message as it stands, within 2 of what `take` returns. */
  get size(): number {
    return this.end;
  }

  /** Appends an event; returns its encoded bytes. */
  add(e: CallEvent): number {
    const shared = buf;
    const sharedView = view;
    buf = this.bytes;
    view = this.view;
    pos = this.end;
    writeEvent(e);
    // `ensure` may have grown the buffer: keep the grown one.
    this.bytes = buf;
    this.view = view;
    this.last = this.end;
    this.end = pos;
    buf = shared;
    view = sharedView;
    this.count++;
    return this.end - this.last;
  }

  /** Takes back the event `add` appended last (once after each `add`). */
  dropLast(): void {
    this.end = this.last;
    this.count--;
  }

  /** The batch as one MessagePack array (a copy), and empties it. */
  take(): Uint8Array {
    const { bytes, end, count } = this;
    let out: Uint8Array;
    if (count < ARRAY.fixLimit) {
      out = new Uint8Array(end - BATCH_HEADER + 1);
      out[0] = ARRAY.fix | count;
      out.set(bytes.subarray(BATCH_HEADER, end), 1);
    } else {
      bytes[0] = ARRAY.u16;
      this.view.setUint16(1, count);
      out = new Uint8Array(bytes.subarray(0, end));
    }
    this.end = this.last = BATCH_HEADER;
    this.count = 0;
    return out;
  }
}

// Each field by name: a loop over names would make every property read a slow keyed one.
function writeEvent(e: CallEvent): void {
  ensure(1);
  const header = pos++;
  const count =
    field(KEY.callId, e.callId) +
    field(KEY.name, e.name) +
    field(KEY.target, e.target) +
    field(KEY.op, e.op) +
    field(KEY.session, e.session) +
    field(KEY.principal, e.principal) +
    field(KEY.traceparent, e.traceparent) +
    field(KEY.outcome, e.outcome) +
    field(KEY.code, e.code) +
    field(KEY.durationMs, e.durationMs) +
    field(KEY.attempts, e.attempts) +
    field(KEY.argumentsDigest, e.argumentsDigest) +
    field(KEY.argumentsBytes, e.argumentsBytes) +
    field(KEY.at, e.at) +
    field(KEY.grantFailure, e.grantFailure) +
    field(KEY.grantSubject, e.grantSubject) +
    field(KEY.approvalId, e.approvalId) +
    field(KEY.approvedBy, e.approvedBy) +
    field(KEY.rejectedBy, e.rejectedBy) +
    field(KEY.approvalWaitMs, e.approvalWaitMs) +
    summaryField(e.refused) +
    definitionField(e.definition);
  if (count < 16)
    buf[header] = 0x80 | count; // fixmap: every event of a call that ran
  else {
    // map16: an event with every field set (a refusal's fields with a call's) needs 2 more bytes.
    ensure(2);
    buf.copyWithin(header + 3, header + 1, pos);
    buf[header] = 0xde;
    view.setUint16(header + 1, count);
    pos += 2;
  }
}

/** Writes a summary's `refused` field unless there is none (only summaries have one); returns how many it wrote. */
function summaryField(s: RefusalSummary | undefined): number {
  if (s === undefined) return 0;
  writeKey(KEY.refused);
  mapHeader(5);
  writeString('count');
  writeNumber(s.count);
  writeString('reasons');
  const reasons = Object.entries(s.reasons);
  mapHeader(reasons.length);
  for (const [reason, n] of reasons) {
    writeString(reason);
    writeNumber(n);
  }
  writeString('tools');
  arrayHeader(s.tools.length);
  for (const tool of s.tools) writeString(tool);
  writeString('otherTools');
  writeNumber(s.otherTools);
  writeString('since');
  writeString(s.since);
  return 1;
}

/** Writes a definition event's `definition` field unless there is none; returns how many it wrote. */
function definitionField(d: DefinitionChange | undefined): number {
  if (d === undefined) return 0;
  writeKey(KEY.definition);
  mapHeader(3 + (d.before === undefined ? 0 : 1) + (d.after === undefined ? 0 : 1));
  writeString('server');
  writeString(d.server);
  writeString('tool');
  writeString(d.tool);
  writeString('change');
  writeString(d.change);
  if (d.before !== undefined) {
    writeString('before');
    writeString(d.before);
  }
  if (d.after !== undefined) {
    writeString('after');
    writeString(d.after);
  }
  return 1;
}

function writeKey(name: Uint8Array): void {
  ensure(name.length);
  const b = buf;
  let p = pos;
  for (let i = 0; i < name.length; i++) b[p++] = name[i] as number;
  pos = p;
}

/** Writes one field (a string or a number) unless its value is undefined; returns how many it wrote. */
function field(name: Uint8Array, value: string | number | undefined): number {
  if (value === undefined) return 0;
  writeKey(name);
  if (typeof value === 'number') writeNumber(value);
  else writeString(String(value));
  return 1;
}

function ensure(bytes: number): void {
  if (pos + bytes <= buf.length) return;
  const bigger = Buffer.alloc(Math.max(buf.length * 2, pos + bytes));
  bigger.set(buf.subarray(0, pos));
  buf = bigger;
  view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** Formats of a length or unsigned integer: the 1-byte form and its limit, then the 8-, 16- and 32-bit type bytes. */
const ARRAY = { fix: 0x90, fixLimit: 16, u8: undefined, u16: 0xdc, u32: 0xdd };
const MAP = { fix: 0x80, fixLimit: 16, u8: undefined, u16: 0xde, u32: 0xdf };
const STR = { fix: 0xa0, fixLimit: 32, u8: 0xd9, u16: 0xda, u32: 0xdb };
const UINT = { fix: 0x00, fixLimit: 0x80, u8: 0xcc, u16: 0xcd, u32: 0xce };

/** Writes `n` in the smallest form of `format` (n < 2^32). */
function sized(
  n: number,
  format: { fix: number; fixLimit: number; u8: number | undefined; u16: number; u32: number },
): void {
  ensure(5);
  if (n < format.fixLimit) buf[pos++] = format.fix | n;
  else if (n < 0x100 && format.u8 !== undefined) {
    buf[pos++] = format.u8;
    buf[pos++] = n;
  } else if (n < 0x10000) {
    buf[pos++] = format.u16;
    view.setUint16(pos, n);
    pos += 2;
  } else {
    buf[pos++] = format.u32;
    view.setUint32(pos, n);
    pos += 4;
  }
}

function arrayHeader(n: number): void {
  sized(n, ARRAY);
}

function mapHeader(n: number): void {
  sized(n, MAP);
}

/** Strings up to this long are copied a character at a time; longer, `Buffer#write` is faster. */
const LOOP_LONGEST = 15;

/** Bytes of the smallest string header for `length` bytes. */
function strHeaderBytes(length: number): number {
  return length < STR.fixLimit ? 1 : length < 0x100 ? 2 : length < 0x10000 ? 3 : 5;
}

function writeString(s: string): void {
  const n = s.length;
  if (n <= LOOP_LONGEST) {
    // Short and, almost always, ASCII: written in a loop, no call into C++.
    const start = pos;
    sized(n, STR);
    ensure(n);
    const b = buf;
    let p = pos;
    let i = 0;
    for (; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) break;
      b[p++] = c;
    }
    if (i === n) {
      pos = p;
      return;
    }
    pos = start;
  }
  // Written after the header its UTF-16 length needs, which is the right one when it is ASCII
  // (UTF-8 is as long as UTF-16 only then); otherwise moved to follow the header its bytes need.
  const header = strHeaderBytes(n);
  ensure(5 + 3 * n);
  const bytes = buf.write(s, pos + header);
  const needs = strHeaderBytes(bytes);
  if (needs !== header) buf.copyWithin(pos + needs, pos + header, pos + header + bytes);
  sized(bytes, STR);
  pos += bytes;
}

function writeNumber(n: number): void {
  if (Number.isInteger(n) && n >= 0 && n <= 0xffffffff) {
    sized(n, UINT);
    return;
  }
  ensure(9);
  buf[pos++] = 0xcb;
  view.setFloat64(pos, n);
  pos += 8;
}

/**
 * The events of one message of `system.dispatcher.events.call` (an array of events, or one), in
 * order; entries that are not events are undefined, keeping their places. A message that is no
 * batch by its header (`eventsIn`), or is unreadable, has none.
 */
export function decodeCallEvents(data: Uint8Array): (CallEvent | undefined)[] {
  if (eventsIn(data) === undefined) return [];
  let value: unknown;
  try {
    value = decodeBody(data);
  } catch {
    return [];
  }
  const list = Array.isArray(value) ? value : [value];
  return list.map((e) => (e !== null && typeof e === 'object' && !Array.isArray(e) ? (e as CallEvent) : undefined));
}

/**
 * How many events a message holds, from its MessagePack header: an array's length, 1 for a map.
 * Undefined when it is neither, or claims more events than it has bytes (each takes at least one).
 * The one check of a batch's header: every reader (the decoder, the index, the in-memory
 * traces) takes a message for a batch by it.
 */
export function eventsIn(bytes: Uint8Array): number | undefined {
  const first = bytes[0];
  if (first === undefined) return undefined;
  if ((first >= 0x80 && first <= 0x8f) || first === 0xde || first === 0xdf) return 1; // one event, a map
  let count: number;
  let header: number;
  if (first >= 0x90 && first <= 0x9f)
    [count, header] = [first - 0x90, 1]; // fixarray
  else if (first === 0xdc && bytes.length >= 3)
    [count, header] = [(bytes[1] as number) * 0x100 + (bytes[2] as number), 3]; // array 16
  else if (first === 0xdd && bytes.length >= 5)
    [count, header] = [new DataView(bytes.buffer, bytes.byteOffset, 5).getUint32(1), 5]; // array 32
  else return undefined;
  return count <= bytes.length - header ? count : undefined;
}

/** `traceparent` as MessagePack writes a key of 11 bytes (fixstr), the needle of `traceIdsOfBatch`. */
const TRACEPARENT_KEY = Buffer.from([0xab, ...Buffer.from('traceparent')]);

/**
 * The distinct trace ids of a batch's events. A MessagePack batch is not decoded: every
 * `traceparent` key is found in its bytes and the string after it read (a tenth of decoding
 * the events). A key-like run of bytes inside some other string can only add a trace id, which
 * costs a lookup a batch to read and filter out; a real key is never skipped. A message that is
 * no batch by its header (`eventsIn`) has none, as it has no events for the queries.
 */
export function traceIdsOfBatch(data: Uint8Array): Set<string> {
  const ids = new Set<string>();
  forEachTraceId(data, (bytes, at) => ids.add(bytes.toString('latin1', at, at + TRACE_ID_LENGTH)));
  return ids;
}

/** Characters of a trace id: 32 lowercase hex digits. */
export const TRACE_ID_LENGTH = 32;

/**
 * Visits the trace id of each event of a batch, as `traceIdsOfBatch` finds them, where its 32
 * hex digits are (`bytes`, `at`): mostly in the batch itself, so the indexer copies them from
 * there and makes no string per trace (a trace id of an event sent twice is visited twice).
 */
export function forEachTraceId(data: Uint8Array, visit: (bytes: Buffer, at: number) => void): void {
  if (eventsIn(data) === undefined) return;
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  for (let at = bytes.indexOf(TRACEPARENT_KEY); at >= 0; at = bytes.indexOf(TRACEPARENT_KEY, at + 1)) {
    const value = at + TRACEPARENT_KEY.length;
    const id = traceIdAt(bytes, value);
    if (id >= 0) visit(bytes, id);
    else {
      const other = traceIdOf(shortStringAt(bytes, value));
      if (other !== undefined) visit(Buffer.from(other, 'latin1'), 0);
    }
  }
}

/** Length of a W3C `traceparent` of version 00: `vv-<32 hex>-<16 hex>-ff`. */
const TRACEPARENT_LENGTH = 55;

/**
 * Where the trace id of the `traceparent` the dispatcher writes at `at` starts (a str8 of 55
 * bytes, lowercase hex where W3C says so), read from its bytes: no string, no regular
 * expression. -1 for anything else, which `traceIdOf` then judges from its text.
 */
function traceIdAt(bytes: Buffer, at: number): number {
  if (bytes[at] !== 0xd9 || bytes[at + 1] !== TRACEPARENT_LENGTH) return -1;
  const start = at + 2;
  if (start + TRACEPARENT_LENGTH > bytes.length) return -1;
  for (let i = 0; i < TRACEPARENT_LENGTH; i++) {
    const c = bytes[start + i] as number;
    const dash = i === 2 || i === 35 || i === 52;
    if (dash ? c !== 0x2d : !((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return -1;
  }
  return start + 3;
}

/** The MessagePack string at `at` if it is one of at most 255 bytes (a traceparent is 55). */
function shortStringAt(bytes: Buffer, at: number): string | undefined {
  const header = bytes[at];
  if (header === undefined) return undefined;
  const [start, length] =
    (header & 0xe0) === 0xa0 ? [at + 1, header & 0x1f] : header === 0xd9 ? [at + 2, bytes[at + 1]] : [0, undefined];
  if (length === undefined || start + length > bytes.length) return undefined;
  return bytes.toString('latin1', start, start + length);
}
