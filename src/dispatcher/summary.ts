/**
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
    const shown = value.slice(0, limits.items).map((v) => render(v, limits, depth + 1, state));
    const more = value.length > limits.items ? [`…(+${value.length - limits.items} more items)`] : [];
    return `[${[...shown, ...more].join(', ')}]`;
  }
  const keys = Object.keys(value);
  if (depth >= limits.depth) return leaf(`{…${keys.length} keys}`);
  const shown = keys
    .slice(0, limits.items)
    .map((k) => `${leaf(k)}: ${render((value as Record<string, unknown>)[k], limits, depth + 1, state)}`);
  const more = keys.length > limits.items ? [`…(+${keys.length - limits.items} more keys)`] : [];
  return `{${[...shown, ...more].join(', ')}}`;
}
