/**
 * Bodies on the wire: MessagePack maps, or JSON when the request says
 * `Content-Type: application/json`. An empty body is `{}`. Replies from mounts this project
 * did not write are read by their `Content-Type`, else as MessagePack, else as JSON.
 */
import { Decoder, Encoder } from '@msgpack/msgpack';
import { BadRequestError } from './errors.js';
import { jsonShapeViolation, msgPackShapeViolation, REQUEST_SHAPE, type ShapeBounds } from './shape.js';

/** The content type that switches a request (and its reply) to JSON. */
export const JSON_CONTENT_TYPE = 'application/json';

/** Encodings a body may travel in. */
export const Encoding = { MsgPack: 'msgpack', Json: 'json' } as const;
export type Encoding = (typeof Encoding)[keyof typeof Encoding];

const encoder = new Encoder({ ignoreUndefined: true });
// Limits keep a hostile body from allocating far beyond its own size.
const decoder = new Decoder({ maxStrLength: 64 * 1024 * 1024, maxBinLength: 64 * 1024 * 1024 });
const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: true });

/** Encodes a value as a body; `undefined` fields are left out in both encodings. */
export function encodeBody(value: unknown, encoding: Encoding = Encoding.MsgPack): Uint8Array {
  if (encoding === Encoding.Json) return utf8Encoder.encode(JSON.stringify(value));
  return encoder.encode(value);
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
 * failing that as JSON. Throws `BadRequestError` when nothing decodes it; the caller decides
 * whose fault that is (a reply's is its sender's).
 */
export function decodeReply(data: Uint8Array, contentType?: string): unknown {
  const declared = encodingOfContentType(contentType);
  if (declared === 'text') return data.length === 0 ? '' : utf8Decoder.decode(data);
  if (declared !== undefined) return decodeBody(data, declared);
  try {
    return decodeBody(data, Encoding.MsgPack);
  } catch (notMsgPack) {
    try {
      return decodeBody(data, Encoding.Json);
    } catch {
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
