/**
 * Text from the bus made safe to show a person: what the CLI prints, what the service's terminal
 * asks an approver, what the console renders as text. Shared by those three, so none reaches
 * into another's folder for it.
 */

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

/**
 * `text` with its terminal control characters shown as `\u` escapes. What the CLI prints comes
 * from the bus (tool names, results, audit events any caller can shape): raw, an escape sequence
 * in it could erase lines, forge others or retitle the window (`watch --calls` prints what any
 * caller named). JSON output is unaffected: JSON escapes these already.
 */
export function printable(text: string): string {
  return text.replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
