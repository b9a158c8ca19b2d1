/**
 * Bodies on the wire: MessagePack maps, or JSON when the request says
 * `Content-Type: application/json`. An empty body is `{}`. Replies from mounts this project
 * did not write are read by their `Content-Type`, else as MessagePack, else as JSON.
 *
 * A request's shape is judged from its bytes before anything decodes it: how deep it nests, how
 * many entries each map and array holds, how many values it holds in all, and (for a request
 * whose schema closes its top level) whether each top-level key is one the op knows. One pass,
 * nothing allocated but a few typed arrays, and it stops at the first problem: a body built to
 * be expensive (60,000 unknown keys, 900,000 levels of nesting) costs the time to reach its
 * first excess, not the time to decode it.
 *
 * Hashing is here too (at the end): SHA-256 of a text and a session request's cache key.
 */
import { hash } from 'node:crypto';
import { Decoder, Encoder } from '@msgpack/msgpack';
import { BadRequestError, PayloadTooLargeError, ReplyShapeError, type Violation } from './errors.js';

/** The content type that switches a request (and its reply) to JSON. */
export const JSON_CONTENT_TYPE = 'application/json';

/** Encodings a body may travel in. */
export const Encoding = { MsgPack: 'msgpack', Json: 'json' } as const;
export type Encoding = (typeof Encoding)[keyof typeof Encoding];

/** How large a body's structure may be. */
export interface ShapeBounds {
  /** Most levels of maps and arrays, the body's own map being level 1. */
  maxDepth: number;
  /** Most entries (key–value pairs) of one map. */
  maxMapEntries: number;
  /** Most items of one array. */
  maxArrayItems: number;
  /** Most values in the whole body (every map, array, key and scalar). */
  maxValues: number;
}

/** The bounds of every request a mount reads (PROTOCOL section 2). */
export const REQUEST_SHAPE: ShapeBounds = {
  maxDepth: 64,
  maxMapEntries: 4_096,
  maxArrayItems: 65_536,
  maxValues: 262_144,
} as const;

/**
 * The bounds of every reply read from a target (its body, an error reply's body, a progress
 * report), judged from its bytes before it is decoded: a target is a mount this project may not
 * have written, and a reply of max_payload built of one-byte values (a million levels, a million
 * empty maps) would cost the one event loop that serves every caller up to ~0.8 s to decode.
 * Wider than a request's where an honest result needs it: 128 levels (an MCP result nests a few
 * levels around whatever structured content its tool returns), 65,536 entries a map (a table
 * keyed by id), 262,144 items an array and values in all (a dense 1 MB table of small records
 * holds ~200,000).
 */
export const REPLY_SHAPE: ShapeBounds = {
  maxDepth: 128,
  maxMapEntries: 65_536,
  maxArrayItems: 262_144,
  maxValues: 262_144,
} as const;

/** What a shape check finds wrong: one violation, the first met. */
export type ShapeViolation = Violation & { keyword: 'maxDepth' | 'maxEntries' | 'maxValues' | 'unknownField' };

const encoder = new Encoder({ ignoreUndefined: true });
// Limits keep a hostile body from allocating far beyond its own size.
const decoder = new Decoder({ maxStrLength: 64 * 1024 * 1024, maxBinLength: 64 * 1024 * 1024 });
const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * Encodes a value as a body; `undefined` fields are left out in both encodings. In JSON, bytes
 * are their base64 text (JSON has no bytes; left to itself it writes an object of one key per
 * byte, ten times their size).
 */
export function encodeBody(value: unknown, encoding: Encoding = Encoding.MsgPack): Uint8Array {
  if (encoding === Encoding.Json) return utf8Encoder.encode(jsonOf(value));
  return encoder.encode(value);
}

/**
 * A value as JSON text, bytes as their base64 text. The replacer takes JSON.stringify off its
 * fast path (every key a call), so it is used only for a value that holds bytes.
 */
export function jsonOf(value: unknown): string {
  return JSON.stringify(value, holdsBytes(value) ? bytesAsBase64 : undefined);
}

/** The replacer of `jsonOf`; reads the holder's own value, as a Buffer's `toJSON` runs first. */
function bytesAsBase64(this: Record<string, unknown>, key: string, v: unknown): unknown {
  const own = this[key];
  return own instanceof Uint8Array ? Buffer.from(own.buffer, own.byteOffset, own.length).toString('base64') : v;
}

/** Does `value` hold bytes anywhere (a `Uint8Array`)? Stops at the first; never descends into bytes. */
export function holdsBytes(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (value instanceof Uint8Array) return true;
  if (Array.isArray(value)) return value.some(holdsBytes);
  for (const key in value) if (holdsBytes((value as Record<string, unknown>)[key])) return true;
  return false;
}

/**
 * Decodes a body into a value, throwing `BadRequestError` for anything that is not
 * valid MessagePack (or JSON). An empty body decodes to `{}`.
 */
export function decodeBody(data: Uint8Array, encoding: Encoding = Encoding.MsgPack): unknown {
  if (data.length === 0) return {};
  try {
    if (encoding === Encoding.Json) return JSON.parse(utf8Decoder.decode(data));
    return decoder.decode(data);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new BadRequestError(`body is not valid ${encoding === Encoding.Json ? 'JSON' : 'MessagePack'}: ${reason}`, {
      details: { violations: [{ path: '', message: `not decodable as ${encoding}` }] },
      cause: err,
    });
  }
}

/** What a reply's `Content-Type` says of its body. */
function encodingOfContentType(contentType: string | undefined): Encoding | 'text' | undefined {
  const type = contentType?.split(';', 1)[0]?.trim().toLowerCase();
  if (type === undefined || type === '') return undefined;
  if (type === JSON_CONTENT_TYPE || type.endsWith('+json')) return Encoding.Json;
  if (type.startsWith('text/')) return 'text';
  return type.endsWith('msgpack') ? Encoding.MsgPack : undefined;
}

/**
 * Decodes a reply body as PROTOCOL section 2 says a reader must (mounts in other languages
 * answer JSON by default): by its `Content-Type` when it has one, else as MessagePack, and
 * failing that as JSON. Its shape is judged from its bytes first, within `bounds` (default
 * `REPLY_SHAPE`): `ReplyShapeError` at the first excess, nothing decoded. Throws
 * `BadRequestError` when nothing decodes it; the caller decides whose fault that is (a reply's
 * is its sender's).
 */
export function decodeReply(data: Uint8Array, contentType?: string, bounds: ShapeBounds = REPLY_SHAPE): unknown {
  const declared = encodingOfContentType(contentType);
  if (declared === 'text') return data.length === 0 ? '' : utf8Decoder.decode(data);
  if (declared !== undefined) return decodeShaped(data, declared, bounds);
  return decodeUnlabelled(data, (body, encoding) => decodeShaped(body, encoding, bounds));
}

/**
 * Decodes a reply body of `encoding` once its bytes show its shape within `bounds`; throws
 * `ReplyShapeError` at the first excess, before anything decodes it.
 */
function decodeShaped(data: Uint8Array, encoding: Encoding, bounds: ShapeBounds): unknown {
  const violation = encoding === Encoding.Json ? jsonShapeViolation(data, bounds) : msgPackShapeViolation(data, bounds);
  if (violation !== undefined) {
    throw new ReplyShapeError(`reply ${violation.message}`, { details: { violations: [violation] } });
  }
  return decodeBody(data, encoding);
}

/**
 * Decodes a body that says nothing of its encoding (no `Content-Type`) as PROTOCOL section 2
 * says a reader must: as MessagePack, failing that as JSON, each time by `decode` (`decodeBody`,
 * or `decodeMap` to bound its shape first). Throws `BadRequestError` when neither decodes it.
 */
export function decodeUnlabelled<T>(data: Uint8Array, decode: (data: Uint8Array, encoding: Encoding) => T): T {
  try {
    return decode(data, Encoding.MsgPack);
  } catch (notMsgPack) {
    // A reply refused for its shape is not read again as JSON: JSON text read as MessagePack is
    // one value (its first byte is below 0x80), never a shape refusal, so the refusal is the body's.
    if (notMsgPack instanceof ReplyShapeError) throw notMsgPack;
    try {
      return decode(data, Encoding.Json);
    } catch (notJson) {
      if (notJson instanceof ReplyShapeError) throw notJson;
      throw new BadRequestError(`body is neither MessagePack nor JSON (${(notMsgPack as Error).message})`, {
        cause: notMsgPack,
      });
    }
  }
}

/** How deeply a request may nest maps and arrays; deeper bodies are refused before any work. */
export const MAX_DEPTH = REQUEST_SHAPE.maxDepth;

/**
 * Decodes a body that must be one map (a plain object), as every request is, within `bounds`
 * (default `REQUEST_SHAPE`: 64 levels, 4,096 entries a map, 65,536 items an array, 262,144
 * values), judged from its bytes before it is decoded: handlers never meet a structure deep
 * enough to exhaust the stack, and a body built to be expensive is refused at the cost of
 * reaching its first excess. `knownKeys`: the only top-level keys allowed; the first other one
 * is refused, unread beyond it.
 */
export function decodeMap(
  data: Uint8Array,
  encoding: Encoding = Encoding.MsgPack,
  knownKeys?: ReadonlySet<string>,
  bounds: ShapeBounds = REQUEST_SHAPE,
): Record<string, unknown> {
  const violation =
    encoding === Encoding.Json
      ? jsonShapeViolation(data, bounds, knownKeys)
      : msgPackShapeViolation(data, bounds, knownKeys);
  if (violation !== undefined) {
    throw new BadRequestError(`body ${violation.path === '' ? '' : `field ${violation.path} `}${violation.message}`, {
      details: { violations: [violation] },
    });
  }
  const value = decodeBody(data, encoding);
  if (value === null || typeof value !== 'object' || Array.isArray(value) || value instanceof Uint8Array) {
    throw new BadRequestError('body must be a map (an object)', {
      details: { violations: [{ path: '', message: 'must be an object', keyword: 'type' }] },
    });
  }
  return value as Record<string, unknown>;
}

/**
 * Whether maps and arrays in `value` nest deeper than `max`. Recursive but bounded: it never
 * descends past `max + 1` levels, however deep the input, and allocates nothing.
 */
export function nestedDeeperThan(value: object, max: number): boolean {
  return depthExceeds(value, 1, max);
}

/**
 * Whether JSON text nests objects and arrays deeper than `max`: one pass over the characters,
 * skipping strings, so text far deeper than the stack is judged before anything parses it.
 * Malformed text is left to the parser to report.
 */
export function jsonTextDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      // A backslash escapes the character after it.
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

function depthExceeds(node: object, depth: number, max: number): boolean {
  if (depth > max) return true;
  if (Array.isArray(node)) {
    for (const child of node)
      if (child !== null && typeof child === 'object' && depthExceeds(child, depth + 1, max)) return true;
  } else if (!(node instanceof Uint8Array)) {
    for (const key in node) {
      const child = (node as Record<string, unknown>)[key];
      if (child !== null && typeof child === 'object' && depthExceeds(child, depth + 1, max)) return true;
    }
  }
  return false;
}

/**
 * A reply that is sent many times (a cached resolution): its bytes are computed once per
 * encoding and reused. Return one from an op handler instead of the plain value.
 */
export class Encoded {
  private msgpack: Uint8Array | undefined;
  private json: Uint8Array | undefined;

  constructor(readonly value: unknown) {}

  /** The bytes of the value in `encoding`, computed on first use. */
  bytes(encoding: Encoding): Uint8Array {
    if (encoding === Encoding.Json) return (this.json ??= encodeBody(this.value, Encoding.Json));
    return (this.msgpack ??= encodeBody(this.value, Encoding.MsgPack));
  }
}

const encodedOf = new WeakMap<object, Encoded>();

/** The one `Encoded` of an object that does not change (cached replies). */
export function encodedOnce(value: object): Encoded {
  let encoded = encodedOf.get(value);
  if (encoded === undefined) {
    encoded = new Encoded(value);
    encodedOf.set(value, encoded);
  }
  return encoded;
}

/*
 * The shape of a body, judged from its bytes.
 */

const tooDeep = (max: number): ShapeViolation => ({
  path: '',
  message: `nests deeper than ${max} levels`,
  keyword: 'maxDepth',
});
/** `entries` undefined: more than `max` (text is not read further to count them). */
const tooMany = (entries: number | undefined, map: boolean, max: number): ShapeViolation => ({
  path: '',
  message: `holds a${map ? ' map of' : 'n array of'} ${entries ?? `more than ${max}`} ${map ? 'entries' : 'items'}; at most ${max} are read`,
  keyword: 'maxEntries',
});
const tooLarge = (max: number): ShapeViolation => ({
  path: '',
  message: `holds more than ${max} values`,
  keyword: 'maxValues',
});
const unknownField = (key: string, known: ReadonlySet<string>): ShapeViolation => ({
  path: `/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`,
  message: `is not a known field (known fields: ${[...known].join(', ')})`,
  keyword: 'unknownField',
});

/** Longest top-level key compared with the known ones; a longer one is unknown without reading it. */
const LONGEST_KEY = 256;
/** Top-level keys are compared as decoded, malformed bytes and all (the decoder reports those). */
const keyUtf8 = new TextDecoder('utf-8');

/**
 * Scratch of the shape checks' per-level counters, shared: a check runs to its end without
 * calling out, so no two use it at once, and a request costs no typed array of its own (one over
 * 64 bytes is an off-heap allocation, freed by the next scavenge).
 */
let levelsScratch = new Float64Array(REQUEST_SHAPE.maxDepth + 2);
let mapsScratch = new Uint8Array(REQUEST_SHAPE.maxDepth + 2);

/** The shared per-level counters for `maxDepth`: a check sets each level as it enters it. */
function levels(maxDepth: number): Float64Array {
  if (levelsScratch.length < maxDepth + 2) levelsScratch = new Float64Array(maxDepth + 2);
  return levelsScratch;
}

function maps(maxDepth: number): Uint8Array {
  if (mapsScratch.length < maxDepth + 2) mapsScratch = new Uint8Array(maxDepth + 2);
  return mapsScratch;
}

/** Longest key read a character a byte when it is ASCII, without a decoder (or a view to hand it). */
const SHORT_KEY = 32;

/** The top-level key of `length` bytes at `pos`, decoded. */
function keyAt(data: Uint8Array, pos: number, length: number): string {
  if (length > SHORT_KEY) return keyUtf8.decode(data.subarray(pos, pos + length));
  let key = '';
  for (let i = pos; i < pos + length; i++) {
    const c = data[i] as number;
    if (c >= 0x80) return keyUtf8.decode(data.subarray(pos, pos + length));
    key += String.fromCharCode(c);
  }
  return key;
}

/**
 * The first way a MessagePack body breaks `bounds`, or undefined. `knownKeys`: the only
 * top-level keys the body may have (its schema closes its top level). Malformed bytes are left
 * to the decoder to report.
 */
export function msgPackShapeViolation(
  data: Uint8Array,
  bounds: ShapeBounds,
  knownKeys?: ReadonlySet<string>,
): ShapeViolation | undefined {
  // remaining[d]: values still to read at level d (a map counts its keys and its values).
  const remaining = levels(bounds.maxDepth);
  let topIsMap = false;
  let depth = 0;
  let values = 0;
  let pos = 0;
  remaining[0] = 1;
  const length = data.length;
  for (;;) {
    while (depth >= 0 && remaining[depth] === 0) depth--;
    if (depth < 0 || pos >= length) return undefined;
    const isTopKey = depth === 1 && topIsMap && ((remaining[1] as number) & 1) === 0;
    remaining[depth] = (remaining[depth] as number) - 1;
    if (++values > bounds.maxValues) return tooLarge(bounds.maxValues);
    const b = data[pos++] as number;
    let entries = -1;
    let map = false;
    let skip = 0;
    let strLength = -1;
    if (b <= 0x7f || b >= 0xe0) skip = 0;
    else if (b <= 0x8f) {
      entries = b & 0x0f;
      map = true;
    } else if (b <= 0x9f) entries = b & 0x0f;
    else if (b <= 0xbf) strLength = b & 0x1f;
    else {
      switch (b) {
        case 0xc4:
        case 0xd9:
          strLength = readLength(data, pos, 1);
          pos += 1;
          break;
        case 0xc5:
        case 0xda:
          strLength = readLength(data, pos, 2);
          pos += 2;
          break;
        case 0xc6:
        case 0xdb:
          strLength = readLength(data, pos, 4);
          pos += 4;
          break;
        case 0xc7:
          skip = 1 + readLength(data, pos, 1);
          pos += 1;
          break;
        case 0xc8:
          skip = 1 + readLength(data, pos, 2);
          pos += 2;
          break;
        case 0xc9:
          skip = 1 + readLength(data, pos, 4);
          pos += 4;
          break;
        case 0xca:
        case 0xce:
        case 0xd2:
          skip = 4;
          break;
        case 0xcb:
        case 0xcf:
        case 0xd3:
          skip = 8;
          break;
        case 0xcc:
        case 0xd0:
          skip = 1;
          break;
        case 0xcd:
        case 0xd1:
          skip = 2;
          break;
        case 0xd4:
          skip = 2;
          break;
        case 0xd5:
          skip = 3;
          break;
        case 0xd6:
          skip = 5;
          break;
        case 0xd7:
          skip = 9;
          break;
        case 0xd8:
          skip = 17;
          break;
        case 0xdc:
          entries = readLength(data, pos, 2);
          pos += 2;
          break;
        case 0xdd:
          entries = readLength(data, pos, 4);
          pos += 4;
          break;
        case 0xde:
          entries = readLength(data, pos, 2);
          map = true;
          pos += 2;
          break;
        case 0xdf:
          entries = readLength(data, pos, 4);
          map = true;
          pos += 4;
          break;
        default:
          skip = 0; // nil, booleans, and 0xc1 (never used: the decoder refuses it)
      }
    }
    if (strLength >= 0) {
      if (isTopKey && knownKeys !== undefined) {
        const key = strLength <= LONGEST_KEY ? keyAt(data, pos, strLength) : '';
        if (!knownKeys.has(key)) return unknownField(strLength <= LONGEST_KEY ? key : '(a long key)', knownKeys);
      }
      pos += strLength;
    } else if (entries >= 0) {
      if (entries > (map ? bounds.maxMapEntries : bounds.maxArrayItems))
        return tooMany(entries, map, map ? bounds.maxMapEntries : bounds.maxArrayItems);
      if (depth + 1 > bounds.maxDepth) return tooDeep(bounds.maxDepth);
      depth++;
      remaining[depth] = map ? entries * 2 : entries;
      if (depth === 1) topIsMap = map;
    } else pos += skip;
  }
}

/** A big-endian unsigned length of `size` bytes at `pos` (0 past the end: the decoder reports truncation). */
function readLength(data: Uint8Array, pos: number, size: 1 | 2 | 4): number {
  if (pos + size > data.length) return 0;
  if (size === 1) return data[pos] as number;
  if (size === 2) return ((data[pos] as number) << 8) | (data[pos + 1] as number);
  return (
    (data[pos] as number) * 0x1000000 +
    (((data[pos + 1] as number) << 16) | ((data[pos + 2] as number) << 8) | (data[pos + 3] as number))
  );
}

const EMPTY_BYTES = new Uint8Array(0);
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;

/**
 * The first way JSON text (as UTF-8 bytes, or as a string) breaks `bounds`, or undefined; like
 * `msgPackShapeViolation`. Structure is read outside strings only; entries are counted by their
 * commas, values by commas and openings. Malformed text is left to the parser to report.
 */
export function jsonShapeViolation(
  text: Uint8Array | string,
  bounds: ShapeBounds,
  knownKeys?: ReadonlySet<string>,
): ShapeViolation | undefined {
  const isString = typeof text === 'string';
  const length = text.length;
  // One reader of both kinds, inlined: a closure per kind ran at ~7 ns a byte, this at ~2.
  const chars = isString ? text : '';
  const bytes = isString ? EMPTY_BYTES : text;
  // entries[d]: commas seen at level d; isMap[d]: level d is an object.
  const entries = levels(bounds.maxDepth);
  const isMap = maps(bounds.maxDepth);
  entries[0] = 0;
  let depth = 0;
  let values = 1;
  let expectTopKey = false;
  for (let i = 0; i < length; i++) {
    const c = isString ? chars.charCodeAt(i) : (bytes[i] as number);
    if (c === QUOTE) {
      const start = i + 1;
      let escaped = false;
      for (i = start; i < length; i++) {
        const s = isString ? chars.charCodeAt(i) : (bytes[i] as number);
        if (s === BACKSLASH) {
          escaped = true;
          i++;
        } else if (s === QUOTE) break;
      }
      if (expectTopKey && depth === 1 && knownKeys !== undefined) {
        expectTopKey = false;
        const key = topKey(text, start, i, escaped);
        if (key === undefined || !knownKeys.has(key)) return unknownField(key ?? '(a long key)', knownKeys);
      }
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (++values > bounds.maxValues) return tooLarge(bounds.maxValues);
      if (++depth > bounds.maxDepth) return tooDeep(bounds.maxDepth);
      entries[depth] = 0;
      isMap[depth] = c === OPEN_OBJECT ? 1 : 0;
      if (depth === 1) expectTopKey = c === OPEN_OBJECT;
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      depth--;
    } else if (c === COMMA) {
      if (++values > bounds.maxValues) return tooLarge(bounds.maxValues);
      const map = isMap[depth] === 1;
      const max = map ? bounds.maxMapEntries : bounds.maxArrayItems;
      // n commas separate n + 1 entries.
      entries[depth] = (entries[depth] as number) + 1;
      if ((entries[depth] as number) + 1 > max) return tooMany(undefined, map, max);
      if (depth === 1) expectTopKey = map;
    }
  }
  return undefined;
}

/** A top-level key of JSON text, unescaped; undefined when longer than `LONGEST_KEY`. */
function topKey(text: Uint8Array | string, start: number, end: number, escaped: boolean): string | undefined {
  if (end - start > LONGEST_KEY * 6) return undefined;
  const raw = typeof text === 'string' ? text.slice(start, end) : keyUtf8.decode(text.subarray(start, end));
  if (!escaped) return raw.length <= LONGEST_KEY ? raw : undefined;
  try {
    const key = JSON.parse(`"${raw}"`) as string;
    return key.length <= LONGEST_KEY ? key : undefined;
  } catch {
    return raw;
  }
}

/**
 * The top-level keys a schema allows, when it closes its top level (`additionalProperties:
 * false` beside `properties`, no pattern properties); undefined when any key may come.
 */
export function closedTopLevel(schema: Record<string, unknown>): ReadonlySet<string> | undefined {
  if (schema.additionalProperties !== false || schema.patternProperties !== undefined) return undefined;
  if (schema.allOf !== undefined || schema.anyOf !== undefined || schema.oneOf !== undefined) return undefined;
  const properties = schema.properties;
  if (properties === null || typeof properties !== 'object') return undefined;
  return new Set(Object.keys(properties));
}

/*
 * Hashing the registry, the dispatcher, the approvals, the tasks and identity share: SHA-256 of
 * a text, and the cache key of a session request.
 */

/** SHA-256, hex, of a string (one-shot: no Hash object). */
export function sha256Hex(text: string): string {
  return hash('sha256', text, 'hex');
}

/**
 * Most characters of a session (`$resolve`) request's JSON text. A real one names a profile,
 * a worker, a few dozen skills and refs: a few KB. 64 KiB leaves room for 500 refs of the
 * longest key (128 characters) while a request can no longer make every cache that keys by it
 * hold half a megabyte per entry.
 */
export const MAX_SESSION_REQUEST_CHARS = 64 * 1024;

/** Keys up to this length are used as they are; longer ones by their SHA-256. */
const LONGEST_PLAIN_KEY = 1024;

/**
 * The cache key of a session request's JSON text: the text itself when short (no hashing on
 * the common path), else its SHA-256 (64 bytes held instead of the text). `PayloadTooLargeError`
 * past `maxChars`.
 */
export function sessionKey(text: string, maxChars = MAX_SESSION_REQUEST_CHARS): string {
  if (text.length > maxChars) {
    throw new PayloadTooLargeError(
      `the session request is ${text.length} characters of JSON, over the limit of ${maxChars}: name fewer skills and refs (a context can be referenced once)`,
    );
  }
  // JSON text of an object starts with `{`: a hash key can never equal a plain one.
  return text.length <= LONGEST_PLAIN_KEY ? text : `#${sha256Hex(text)}`;
}
