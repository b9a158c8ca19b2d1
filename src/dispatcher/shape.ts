/**
 * Shaping a target's reply for the model by `resultMode` (PROTOCOL 6.1 step 5), and the
 * cap every mode obeys, which says how much it cut.
 */
import { MAX_DEPTH, nestedDeeperThan } from '../bus/codec.js';
import type { ResultMode } from '../registry/types.js';
import { summarize } from './summary.js';

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
