/**
 * The shape of a body judged from its bytes, before anything decodes it: how deep it nests, how
 * many entries each map and array holds, how many values it holds in all, and (for a request
 * whose schema closes its top level) whether each top-level key is one the op knows. One pass,
 * nothing allocated but a few typed arrays, and it stops at the first problem: a body built to
 * be expensive (60,000 unknown keys, 900,000 levels of nesting) costs the time to reach its
 * first excess, not the time to decode it.
 */
import type { Violation } from './errors.js';

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

/** What a shape check finds wrong: one violation, the first met. */
export type ShapeViolation = Violation & { keyword: 'maxDepth' | 'maxEntries' | 'maxValues' | 'unknownField' };

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
const utf8 = new TextDecoder('utf-8');

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
  const remaining = new Float64Array(bounds.maxDepth + 2);
  let topIsMap = false;
  let depth = 0;
  let values = 0;
  let pos = 0;
  remaining[0] = 1;
  const length = data.length;
  for (;;) {
    while (depth >= 0 && remaining[depth] === 0) depth--;
    if (depth < 0 || pos >= length) return undefined;
    const isTopKey = depth === 1 && topIsMap && (remaining[1] as number) % 2 === 0;
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
        const key = strLength <= LONGEST_KEY ? utf8.decode(data.subarray(pos, pos + strLength)) : '';
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
  const at = isString ? (i: number) => text.charCodeAt(i) : (i: number) => text[i] as number;
  // entries[d]: commas seen at level d; isMap[d]: level d is an object.
  const entries = new Float64Array(bounds.maxDepth + 2);
  const isMap = new Uint8Array(bounds.maxDepth + 2);
  let depth = 0;
  let values = 1;
  let expectTopKey = false;
  for (let i = 0; i < length; i++) {
    const c = at(i);
    if (c === QUOTE) {
      const start = i + 1;
      let escaped = false;
      for (i = start; i < length; i++) {
        const s = at(i);
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
  const raw = typeof text === 'string' ? text.slice(start, end) : utf8.decode(text.subarray(start, end));
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
