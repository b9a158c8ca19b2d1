/** Pieces more than one page uses: error boxes, the session form, links to contexts. */
import { errorStatus, MatrixError } from '../../bus/errors.js';
import { UsageError } from '../../cli/output.js';
import { type SessionFlags, sessionRequest } from '../../cli/session-flags.js';
import type { ResolveRequest } from '../../registry/types.js';
import { type DiffRow, diffLines } from '../diff.js';
import { html, notice, type SafeHtml } from '../html.js';
import type { ConsoleRequest } from '../types.js';

/** A form error of the console's own (bad JSON, a skill line it cannot read). */
export class FormError extends Error {
  override name = 'FormError';
}

/** An error as a box: a bus error with its code and every violation, else its message. */
export function errorNotice(err: unknown, title = 'Failed'): SafeHtml {
  if (err instanceof MatrixError) {
    const violations = err.details?.violations ?? [];
    const list = violations.length
      ? html`<ul>${violations.map((v) => html`<li><code>${v.path || '(body)'}</code> ${v.message}</li>`)}</ul>`
      : '';
    return notice('error', `${title}: ${err.code}`, html`${err.message}${list}`);
  }
  if (err instanceof FormError || err instanceof UsageError) return notice('error', title, err.message);
  return notice('error', title, 'the console hit an unexpected error; its log says more');
}

/** The HTTP status that fits an error. */
export function statusOf(err: unknown): number {
  if (err instanceof MatrixError)
    return err.code === 'unavailable' || err.code === 'timeout' ? 502 : errorStatus[err.code];
  if (err instanceof FormError || err instanceof UsageError) return 400;
  return 500;
}

/** Link to a context's page. */
export function contextLink(key: string): SafeHtml {
  return html`<a class="mono" href="${`/contexts/${encodeURIComponent(key)}`}">${key}</a>`;
}

/** Capability names as chips. */
export function chips(names: readonly string[] | undefined, empty = '—'): SafeHtml {
  if (!names?.length) return html`<span class="muted">${empty}</span>`;
  return html`<span class="chips">${names.map((n) => html`<span class="chip">${n}</span>`)}</span>`;
}

/** Which session fields a form shows. */
export interface SessionFieldOptions {
  /** Field-name prefix, for a second session on one form (`b.`). */
  prefix?: string;
  /** Show `format` and `strict` (presentation; `$resolve` only). */
  presentation?: boolean;
  legend?: string;
}

/** The fields of a `$resolve` request, filled from `values`. */
export function sessionFields(values: URLSearchParams, options: SessionFieldOptions = {}): SafeHtml {
  const p = options.prefix ?? '';
  const v = (name: string) => values.get(p + name) ?? '';
  const input = (name: string, label: string, hint: string) =>
    html`<label>${label} <span class="hint">${hint}</span><input name="${p + name}" value="${v(name)}" autocomplete="off"></label>`;
  const format = v('format');
  const presentation = options.presentation
    ? html`<div class="row"><label>format<select name="${`${p}format`}">${['matrix', 'openai', 'anthropic', 'mcp'].map(
        (f) => html`<option value="${f}" ${f === (format || 'matrix') ? html`selected` : ''}>${f}</option>`,
      )}</select></label>
      <label class="check"><input type="checkbox" name="${`${p}strict`}" ${v('strict') ? html`checked` : ''}> strict (openai)</label>
      <label class="check"><input type="checkbox" name="${`${p}onlyAvailable`}" ${v('onlyAvailable') ? html`checked` : ''}> only available</label></div>`
    : '';
  return html`<fieldset><legend>${options.legend ?? 'Session'}</legend>
    <div class="grid2">${input('profile', 'profile', 'default, edit, propose, evaluate, …')}${input('worker', 'worker', 'claude-code, codex, …')}</div>
    <div class="grid2">${input('refs', 'context refs', 'comma-separated; skips the built-in rules')}${input('requires', 'requires', 'capabilities, comma-separated')}</div>
    <label>skills <span class="hint">one a line: name=ref1,ref2</span><textarea name="${`${p}skills`}" rows="2">${v('skills')}</textarea></label>
    <label>environment <span class="hint">JSON, e.g. {"repoRoot":"/src"}</span><textarea name="${`${p}environment`}" rows="2">${v('environment')}</textarea></label>
    ${presentation}
  </fieldset>`;
}

/** The `$resolve` request the session fields describe; undefined when no profile is given. */
export function sessionFrom(values: URLSearchParams, prefix = ''): ResolveRequest | undefined {
  const v = (name: string) => values.get(prefix + name)?.trim() || undefined;
  const profile = v('profile');
  if (profile === undefined) return undefined;
  const flags: SessionFlags = { profile };
  const set = <K extends keyof SessionFlags>(name: K, value: SessionFlags[K] | undefined) => {
    if (value !== undefined) flags[name] = value;
  };
  set('worker', v('worker'));
  set('refs', v('refs'));
  set('requires', v('requires'));
  set('environment', v('environment'));
  set('format', v('format'));
  set(
    'skill',
    v('skills')
      ?.split(/\r?\n/)
      .map((s) => s.trim())
      .filter(Boolean),
  );
  if (v('onlyAvailable')) flags.onlyAvailable = true;
  if (v('strict')) flags.strict = true;
  const request = sessionRequest(flags);
  if (request.format === 'matrix') delete request.format;
  return request;
}

/** The query parameters of a session, for links that carry it. */
export function sessionParams(values: URLSearchParams, prefix = ''): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const name of ['profile', 'worker', 'refs', 'requires', 'skills', 'environment'])
    out[name] = values.get(prefix + name) ?? undefined;
  return out;
}

/**
 * The grant what this request does is sent with: the signed-in person's access token, else the
 * console's approver grant (`--approver-grant`, or one pasted), else none.
 */
export function actingGrant(request: ConsoleRequest): { grant?: string } {
  const grant = request.person?.grant ?? request.deps.approver.grant;
  return grant === undefined ? {} : { grant };
}

/** Unchanged lines kept around each change in a diff. */
const CONTEXT_LINES = 3;

/** Two values as indented JSON side by side, line by line, long unchanged runs folded. */
export function jsonDiff(a: unknown, b: unknown, headers: readonly [string, string], same: string): SafeHtml {
  const lines = (v: unknown) => (v === undefined ? [] : JSON.stringify(v, null, 2).split('\n'));
  const rows = diffLines(lines(a), lines(b));
  if (rows.every((r) => r.kind === 'same')) return html`<p class="muted">${same}</p>`;
  const keep = rows.map((_, i) =>
    rows.slice(Math.max(0, i - CONTEXT_LINES), i + CONTEXT_LINES + 1).some((r) => r.kind !== 'same'),
  );
  const out: SafeHtml[] = [];
  for (let i = 0; i < rows.length; i++) {
    if (keep[i]) {
      out.push(diffRow(rows[i] as DiffRow));
      continue;
    }
    let j = i;
    while (j < rows.length && !keep[j]) j++;
    out.push(html`<tr class="fold"><td colspan="2" class="muted">… ${j - i} unchanged lines</td></tr>`);
    i = j - 1;
  }
  return html`<div class="table-wrap"><table class="diff"><thead><tr><th>${headers[0]}</th><th>${headers[1]}</th></tr></thead><tbody>${out}</tbody></table></div>`;
}

function diffRow(row: DiffRow): SafeHtml {
  return html`<tr class="${row.kind}"><td class="a">${row.a ?? ''}</td><td class="b">${row.b ?? ''}</td></tr>`;
}
