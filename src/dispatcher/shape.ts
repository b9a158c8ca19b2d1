/**
 * Shaping a target's reply for the model by `resultMode` (PROTOCOL 6.1 step 5), the cap every
 * mode obeys, which says how much it cut, and the `summary` mode's digest within its budget.
 */
import { MAX_DEPTH, nestedDeeperThan } from '../bus/codec.js';
import { firstAndMore } from '../bus/schema-compiler.js';
import type { ResultMode } from '../registry/types.js';

/** Default cap of `content`, in characters (64 KiB). */
export const DEFAULT_CONTENT_CAP = 64 * 1024;

/** A shaped reply: the content for the model, and what was cut. */
export interface Shaped {
  content: string;
  structured?: unknown;
  truncated?: { shown: number; total: number };
}

/** How to shape. */
export interface ShapeOptions {
  /** Most characters of `content`. */
  cap: number;
  /** Budget of `summary` mode, in characters. */
  summaryBudget: number;
}

/** Shapes a reply by mode, then caps it. */
export function shapeReply(reply: unknown, mode: ResultMode, options: ShapeOptions): Shaped {
  switch (mode) {
    case 'json': {
      const shaped = capContent(jsonText(reply), options.cap);
      if (structuredTravels(reply, shaped.truncated !== undefined)) shaped.structured = reply;
      return shaped;
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
 * its text fits the cap uncut (the cap bounds the whole result), and only when it nests shallow
 * enough to be encoded inside a `ToolResult` and read back (`MAX_DEPTH` less the result's own
 * level). Otherwise `content` alone carries it. Every reader of results (the `$call` mount, the
 * MCP bridge) relies on this rule rather than its own.
 */
export function structuredTravels(reply: unknown, contentCut: boolean): boolean {
  if (contentCut) return false;
  return reply === null || typeof reply !== 'object' || !nestedDeeperThan(reply, MAX_DEPTH - 1);
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

/** Cuts `text` to `cap` characters, ending with a note that says how much was cut. */
export function capContent(text: string, cap: number): Shaped {
  if (text.length <= cap) return { content: text };
  const note = (shown: number) => `\n…[truncated: showing ${shown} of ${text.length} characters]`;
  const shown = Math.max(0, cap - note(cap).length);
  return { content: text.slice(0, shown) + note(shown), truncated: { shown, total: text.length } };
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

function showable(_key: string, v: unknown): unknown {
  return typeof v === 'bigint' ? v.toString() : v instanceof Uint8Array ? `<${v.length} bytes>` : v;
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
