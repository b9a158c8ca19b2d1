/**
 * HTML built so that nothing a registrant wrote can become markup: every value put into an
 * `html` template is escaped unless it is itself `SafeHtml` (built the same way). Titles,
 * descriptions, schemas and call fields all come from the bus, so escaping is the default.
 */

/** Markup that is safe to send: made by `html`, or a constant of this module's callers. */
export class SafeHtml {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

/** What an `html` template accepts: escaped text, numbers, nested safe markup, lists; nothing for null/false. */
export type HtmlValue = SafeHtml | string | number | boolean | null | undefined | readonly HtmlValue[];

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text as HTML text or a quoted attribute value. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] as string);
}

function render(value: HtmlValue): string {
  if (value === null || value === undefined || value === false || value === true) return '';
  if (value instanceof SafeHtml) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

/** The tagged template every page is written in: interpolations are escaped. */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): SafeHtml {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) out += render(values[i] as HtmlValue) + (strings[i + 1] ?? '');
  return new SafeHtml(out);
}

/** A path with a query string; empty parameters are left out. */
export function href(path: string, params: Record<string, string | number | undefined> = {}): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params))
    if (value !== undefined && value !== '') query.set(name, String(value));
  const text = query.toString();
  return text === '' ? path : `${path}?${text}`;
}

/** A value as indented JSON inside `<pre>`, escaped. */
export function jsonBlock(value: unknown, className = 'json'): SafeHtml {
  return html`<pre class="${className}">${JSON.stringify(value, null, 2) ?? 'undefined'}</pre>`;
}

/** A table: header cells, then the rows, each a `<tr>` its caller built. */
export function table(header: readonly string[], rows: readonly SafeHtml[]): SafeHtml {
  return html`<div class="table-wrap"><table><thead><tr>${header.map((h) => html`<th>${h}</th>`)}</tr></thead><tbody>${rows}</tbody></table></div>`;
}

/** A small coloured label. */
export function badge(text: string, tone: 'ok' | 'error' | 'warn' | 'muted' | 'info' = 'muted'): SafeHtml {
  return html`<span class="badge ${tone}">${text}</span>`;
}

/** A message box. */
export function notice(tone: 'error' | 'ok' | 'info', title: string, body: HtmlValue = ''): SafeHtml {
  return html`<div class="notice ${tone}" role="${tone === 'error' ? 'alert' : 'status'}"><strong>${title}</strong>${body ? html`<div>${body}</div>` : ''}</div>`;
}
