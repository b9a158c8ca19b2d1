/**
 * Bodies on the wire: MessagePack maps, or JSON when the request says
 * `Content-Type: application/json`. An empty body is `{}`.
 */
import { Decoder, Encoder } from '@msgpack/msgpack';
import { BadRequestError } from './errors.js';

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

/** How deeply a request may nest maps and arrays; deeper bodies are refused before any work. */
export const MAX_DEPTH = 64;

/**
 * Decodes a body that must be one map (a plain object), as every request is, and nests at
 * most `MAX_DEPTH` levels: handlers that walk or stringify what they are given never meet a
 * structure deep enough to exhaust the stack.
 */
export function decodeMap(data: Uint8Array, encoding: Encoding = Encoding.MsgPack): Record<string, unknown> {
  const value = decodeBody(data, encoding);
  if (value === null || typeof value !== 'object' || Array.isArray(value) || value instanceof Uint8Array) {
    throw new BadRequestError('body must be a map (an object)', {
      details: { violations: [{ path: '', message: 'must be an object', keyword: 'type' }] },
    });
  }
  if (nestedDeeperThan(value, MAX_DEPTH)) {
    throw new BadRequestError(`body nests deeper than ${MAX_DEPTH} levels`, {
      details: { violations: [{ path: '', message: `nests deeper than ${MAX_DEPTH} levels`, keyword: 'maxDepth' }] },
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

function depthExceeds(node: object, depth: number, max: number): boolean {
  if (depth > max) return true;
  if (Array.isArray(node)) {
    for (const child of node) if (child !== null && typeof child === 'object' && depthExceeds(child, depth + 1, max)) return true;
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
