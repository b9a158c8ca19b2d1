/**
 * Shaping a target's reply for the model by `resultMode` (PROTOCOL 6.1 step 5), and the
 * cap every mode obeys, which says how much it cut.
 */
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
      const text = jsonText(reply);
      const shaped = capContent(text, options.cap);
      // The structured reply travels only when the text of it fits: the cap bounds the result.
      if (shaped.truncated === undefined) shaped.structured = reply;
      return shaped;
    }
    case 'text': {
      const text =
        typeof reply === 'string' ? reply : typeof (reply as { text?: unknown })?.text === 'string' ? (reply as { text: string }).text : jsonText(reply);
      return capContent(text, options.cap);
    }
    case 'summary':
      return capContent(summarize(reply, Math.min(options.summaryBudget, options.cap)), options.cap);
  }
}

/** Cuts `text` to `cap` characters, ending with a note that says how much was cut. */
export function capContent(text: string, cap: number): Shaped {
  if (text.length <= cap) return { content: text };
  const note = (shown: number) => `\n…[truncated: showing ${shown} of ${text.length} characters]`;
  const shown = Math.max(0, cap - note(cap).length);
  return { content: text.slice(0, shown) + note(shown), truncated: { shown, total: text.length } };
}

function jsonText(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v instanceof Uint8Array ? `<${v.length} bytes>` : v)) ?? 'null';
}
