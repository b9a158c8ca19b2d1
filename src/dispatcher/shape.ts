/**
 * Shaping a target's reply for the model by `resultMode` (PROTOCOL 6.1 step 5), the cap every
 * mode obeys, which says how much it cut, and the `summary` mode's digest within its budget.
 *
 * The cap is of bytes as encoded, not characters: `content` counts the bytes of its JSON string
 * (UTF-8, escapes included: what a task record stores, and never less than MessagePack's UTF-8),
 * and a `structured` reply travels only when its encoding (the larger of MessagePack and JSON,
 * bytes as base64) fits in what `content` left of the cap. A result is so within the cap as a
 * caller receives it and as a finished task keeps it, whatever the reply holds: bytes shown as
 * `<n bytes>` in the text no longer hide megabytes beside it.
 */
import { encodeBody, jsonOf, MAX_DEPTH, nestedDeeperThan } from '../bus/codec.js';
import { firstAndMore } from '../bus/schema-compiler.js';
import type { ResultMode } from '../registry/types.js';

/** Default cap of a result's `content` and `structured` together, in bytes as encoded (64 KiB). */
export const DEFAULT_CONTENT_CAP = 64 * 1024;

/** A shaped reply: the content for the model, and what was cut. */
export interface Shaped {
  content: string;
  structured?: unknown;
  truncated?: { shown: number; total: number };
}

/** How to shape. */
export interface ShapeOptions {
  /** Most bytes of `content` and `structured` together, as encoded (`escapedBytes`, `encodedBytes`). */
  cap: number;
  /** Budget of `summary` mode, in characters. */
  summaryBudget: number;
}

/** Shapes a reply by mode, then caps it. */
export function shapeReply(reply: unknown, mode: ResultMode, options: ShapeOptions): Shaped {
  switch (mode) {
    case 'json': {
      const text = jsonText(reply);
      const shaped = capContent(text, options.cap);
      const room = options.cap - escapedBytes(shaped.content);
      if (structuredTravels(reply, shaped.truncated !== undefined, room)) {
        shaped.structured = reply;
        return shaped;
      }
      if (shaped.truncated !== undefined || tooDeep(reply)) return shaped;
      const size = encodedBytes(reply, room);
      // Not encodable at all (a big integer): its text shows it whole, digits and all.
      if (!Number.isFinite(size)) return shaped;
      // Left out for its size, never silently: the note says so, and content with it fits the cap.
      const shown = /"<\d+ bytes>"/.test(text) ? '; bytes in it are shown above only as <n bytes>' : '';
      const note = `\n…[the reply itself is not attached (structured): at least ${size} bytes encoded, more than the ${room} bytes this text leaves of the ${options.cap}-byte cap${shown}]`;
      const noted = capContent(text, options.cap - escapedBytes(note));
      noted.content += note;
      return noted;
    }
    case 'text': {
      const text =
        typeof reply === 'string'
          ? reply
          : typeof (reply as { text?: unknown })?.text === 'string'
            ? (reply as { text: string }).text
            : jsonText(reply);
      return capContent(text, options.cap);
    }
    case 'summary':
      return capContent(summarize(reply, Math.min(options.summaryBudget, options.cap)), options.cap);
  }
}

/**
 * The one rule for whether a `json` reply travels as `structured` beside its text: only when
 * its text fits the cap uncut, only when it nests shallow enough to be encoded inside a
 * `ToolResult` and read back (`MAX_DEPTH` less the result's own level), and only when its
 * encoding (`encodedBytes`) fits in `room`, what `content` left of the cap (the cap bounds the
 * whole result). Otherwise `content` alone carries it. Every reader of results (the `$call`
 * mount, the MCP bridge) relies on this rule rather than its own.
 */
export function structuredTravels(reply: unknown, contentCut: boolean, room: number): boolean {
  if (contentCut || room < 0 || tooDeep(reply)) return false;
  return encodedBytes(reply, room) <= room;
}

function tooDeep(reply: unknown): boolean {
  return reply !== null && typeof reply === 'object' && nestedDeeperThan(reply, MAX_DEPTH - 1);
}

/**
 * Bytes `value` takes as encoded: the larger of its MessagePack and its JSON (bytes as base64),
 * the encodings a result travels and is stored in. Past `bound` the exact figure matters not: a
 * value whose bytes alone exceed it is not encoded, and its figure is a lower bound (`> bound`).
 */
export function encodedBytes(value: unknown, bound = Number.POSITIVE_INFINITY): number {
  const raw = bytesIn(value, 0);
  if (raw > bound) return raw;
  try {
    return Math.max(encodeBody(value).length, Buffer.byteLength(jsonOf(value)));
  } catch {
    // Not encodable (a big integer in JSON, say): it cannot travel.
    return Number.POSITIVE_INFINITY;
  }
}

/** Bytes held in `Uint8Array`s of `value` (at most `MAX_DEPTH` levels down: deeper never travels). */
function bytesIn(value: unknown, depth: number): number {
  if (value === null || typeof value !== 'object' || depth > MAX_DEPTH) return 0;
  if (value instanceof Uint8Array) return value.length;
  let sum = 0;
  if (Array.isArray(value)) for (const v of value) sum += bytesIn(v, depth + 1);
  else for (const key in value) sum += bytesIn((value as Record<string, unknown>)[key], depth + 1);
  return sum;
}

/**
 * A result's `structured` reply where a reader needs it as an object (MCP's `structuredContent`
 * must be one): present only when it travelled (`structuredTravels`) and is a map.
 */
export function structuredObject(result: { structured?: unknown }): Record<string, unknown> | undefined {
  const structured = result.structured;
  return structured !== null && typeof structured === 'object' && !Array.isArray(structured)
    ? (structured as Record<string, unknown>)
    : undefined;
}

/**
 * A reply that is MCP's `CallToolResult` of a failed tool (`{content: [...], isError: true}`: what
 * an MCP host mount answers for a server's tool error, PROTOCOL 12): the ToolResult is a failed
 * one, its content blocks kept in `structured` and `content` as for any reply.
 */
export function isFailedToolReply(reply: unknown): boolean {
  return (
    reply !== null &&
    typeof reply === 'object' &&
    (reply as { isError?: unknown }).isError === true &&
    Array.isArray((reply as { content?: unknown }).content)
  );
}

/**
 * Cuts `text` to `cap` bytes as `escapedBytes` counts them, ending with a note that says how
 * much was cut (in characters: what the model reads). Never splits a surrogate pair.
 */
export function capContent(text: string, cap: number): Shaped {
  // Six bytes is the most one UTF-16 unit takes escaped (`\u0001`): short text needs no count,
  // and text of more units than the cap has bytes (one at least each) is only counted to the cut.
  if (text.length * 6 <= cap || (text.length <= cap && escapedBytes(text) <= cap)) return { content: text };
  const note = (shown: number) => `\n…[truncated: showing ${shown} of ${text.length} characters]`;
  const shown = prefixWithin(text, Math.max(0, cap - escapedBytes(note(text.length))));
  return { content: text.slice(0, shown) + note(shown), truncated: { shown, total: text.length } };
}

/**
 * Bytes of `text` as a JSON string's contents in UTF-8, escapes included (quotes not counted):
 * what it takes in a stored task record, and never less than its UTF-8 in MessagePack.
 */
export function escapedBytes(text: string): number {
  return Buffer.byteLength(JSON.stringify(text)) - 2;
}

/** How many UTF-16 units of `text`, from its start, fit in `budget` bytes as `escapedBytes` counts them. */
function prefixWithin(text: string, budget: number): number {
  let used = 0;
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    let units = 1;
    let bytes: number;
    if (c === 0x22 || c === 0x5c || c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d) bytes = 2;
    else if (c < 0x20) bytes = 6;
    else if (c < 0x80) bytes = 1;
    else if (c < 0x800) bytes = 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        units = 2;
        bytes = 4;
      } else bytes = 6; // a lone surrogate is escaped
    } else if (c >= 0xdc00 && c <= 0xdfff) bytes = 6;
    else bytes = 3;
    if (used + bytes > budget) break;
    used += bytes;
    i += units;
  }
  return i;
}

/**
 * A reply as JSON text: bytes shown as `<n bytes>`, big integers as their digits. A replacer
 * takes JSON.stringify off its fast path (every key a call), so it is used only for a reply
 * that holds such a value.
 */
function jsonText(value: unknown): string {
  const text = holdsUnjsonable(value, 0) ? JSON.stringify(value, showable) : JSON.stringify(value);
  return text ?? 'null';
}

/** The replacer of `jsonText`; reads the holder's own value, as a Buffer's `toJSON` runs first. */
function showable(this: Record<string, unknown>, key: string, v: unknown): unknown {
  const own = this[key];
  return typeof v === 'bigint' ? v.toString() : own instanceof Uint8Array ? `<${own.length} bytes>` : v;
}

/** Does a reply hold bytes or a big integer (or nest past `MAX_DEPTH`, where the replacer decides too)? */
function holdsUnjsonable(value: unknown, depth: number): boolean {
  if (typeof value === 'bigint') return true;
  if (value === null || typeof value !== 'object') return false;
  if (depth > MAX_DEPTH || ArrayBuffer.isView(value)) return true;
  if (Array.isArray(value)) return value.some((v) => holdsUnjsonable(v, depth + 1));
  for (const key in value) if (holdsUnjsonable((value as Record<string, unknown>)[key], depth + 1)) return true;
  return false;
}

/*
 * A deterministic digest of any reply within a character budget: the same reply gives the
 * same text every time. Long strings and arrays are cut with a note of what was left out;
 * the outline tightens (fewer items, shorter strings, less depth) until it fits.
 */

/** Default budget of a summary, in characters. */
export const DEFAULT_SUMMARY_BUDGET = 2_000;

interface Limits {
  items: number;
  chars: number;
  depth: number;
}

const steps: readonly Limits[] = [
  { items: 20, chars: 400, depth: 8 },
  { items: 10, chars: 200, depth: 6 },
  { items: 5, chars: 100, depth: 4 },
  { items: 3, chars: 60, depth: 3 },
  { items: 2, chars: 40, depth: 2 },
  { items: 1, chars: 20, depth: 1 },
];

/** Summarises `value` in at most `budget` characters. */
export function summarize(value: unknown, budget = DEFAULT_SUMMARY_BUDGET): string {
  let text: string | undefined;
  for (const limits of steps) {
    text = tryRender(value, limits, budget);
    if (text !== undefined) return text;
  }
  // Even the tightest outline is too long (a huge single key, say): cut it.
  text = tryRender(value, steps[steps.length - 1] as Limits, Infinity) ?? '';
  const note = ` …[summary cut at ${budget} characters]`;
  return budget > note.length ? text.slice(0, budget - note.length) + note : text.slice(0, budget);
}

/** Thrown inside a render that has already produced more than the budget. */
const tooLong = Symbol('tooLong');

/** The outline at `limits`, or undefined when it is longer than `budget`; never renders past it. */
function tryRender(value: unknown, limits: Limits, budget: number): string | undefined {
  const state = { used: 0, budget };
  try {
    const text = render(value, limits, 0, state);
    return text.length <= budget ? text : undefined;
  } catch (err) {
    if (err === tooLong) return undefined;
    throw err;
  }
}

function render(value: unknown, limits: Limits, depth: number, state: { used: number; budget: number }): string {
  const leaf = (text: string): string => {
    state.used += text.length;
    if (state.used > state.budget) throw tooLong;
    return text;
  };
  if (value === null || value === undefined) return leaf('null');
  switch (typeof value) {
    case 'string':
      return leaf(
        JSON.stringify(
          value.length > limits.chars
            ? `${value.slice(0, limits.chars)}…(+${value.length - limits.chars} chars)`
            : value,
        ),
      );
    case 'number':
    case 'boolean':
    case 'bigint':
      return leaf(String(value));
    case 'object':
      break;
    default:
      return leaf(JSON.stringify(String(value)));
  }
  if (value instanceof Uint8Array) return leaf(`<${value.length} bytes>`);
  if (Array.isArray(value)) {
    if (depth >= limits.depth) return leaf(`[…${value.length} items]`);
    const items = firstAndMore(
      value,
      limits.items,
      (first) => first.map((v) => render(v, limits, depth + 1, state)),
      (shown, left) => [...shown, `…(+${left} more items)`],
    );
    return `[${items.join(', ')}]`;
  }
  const keys = Object.keys(value);
  if (depth >= limits.depth) return leaf(`{…${keys.length} keys}`);
  const entries = firstAndMore(
    keys,
    limits.items,
    (first) =>
      first.map((k) => `${leaf(k)}: ${render((value as Record<string, unknown>)[k], limits, depth + 1, state)}`),
    (shown, left) => [...shown, `…(+${left} more keys)`],
  );
  return `{${entries.join(', ')}}`;
}
