/**
 * Calls: the dispatcher's audit trail, from `system.traces.$query` joined with the call events
 * this console heard itself (so a call shows the moment its event arrives, whatever the
 * traces mount keeps), searched by trace, session, principal, tool, outcome and time.
 */

import type { CallEvent } from '../../audit/events.js';
import type { TraceQuery } from '../../audit/query.js';
import { traceIdOf } from '../../bus/headers.js';
import { Mounts } from '../../bus/subjects.js';
import { badge, href, html, notice, type SafeHtml, table } from '../html.js';
import { isCallEvent } from '../live.js';
import type { ConsoleRequest, Page, Redirect } from '../types.js';
import { errorNotice, statusOf } from './common.js';
import { cancelOf, runningTasks } from './tasks.js';

const SECTION = '/calls';
/** Rows on one page. */
const SHOWN = 200;
/** Events asked of `system.traces` (its most). */
const QUERIED = 500;
const WINDOWS: Record<string, number> = { '5m': 5 * 60_000, '1h': 3_600_000, '24h': 86_400_000 };

/** The filters of the page, as its query string has them. */
interface CallFilter {
  q: string;
  trace: string;
  session: string;
  principal: string;
  tool: string;
  outcome: string;
  since: string;
}

/** `GET /calls?…`. */
export async function callsPage(request: ConsoleRequest): Promise<Page> {
  const { url, deps } = request;
  const p = url.searchParams;
  const f: CallFilter = {
    q: p.get('q') ?? '',
    trace: (p.get('trace') ?? '').trim().toLowerCase(),
    session: p.get('session') ?? '',
    principal: p.get('principal') ?? '',
    tool: p.get('tool') ?? '',
    outcome: p.get('outcome') ?? '',
    since: p.get('since') ?? '',
  };
  const sinceMs = WINDOWS[f.since] === undefined ? undefined : Date.now() - (WINDOWS[f.since] as number);
  let stored: CallEvent[] = [];
  let failure: unknown;
  try {
    const reply = await deps.client.request<{ events: CallEvent[] }>(Mounts.Traces, '$query', traceQuery(f, sinceMs), {
      timeoutMs: 5_000,
    });
    stored = reply.events;
  } catch (err) {
    failure = err;
  }
  const events = merge(stored, deps.feed.recentCalls()).filter((e) => matches(e, f, sinceMs));
  if (f.trace) events.reverse(); // a trace reads in the order its calls happened
  const tasks = await runningTasks(request);
  const live = html`${tasks}${failure ? errorNotice(failure, 'system.traces did not answer') : ''}
    ${f.trace ? html`<h2>Trace <code>${f.trace}</code>: ${events.length} ${events.length === 1 ? 'call' : 'calls'} <a href="${SECTION}">all calls</a></h2>` : ''}
    <p class="muted">${events.length > SHOWN ? `newest ${SHOWN} of ${events.length} matching calls` : `${events.length} matching calls`}</p>
    ${events.length ? table(['Time', 'Tool', 'Outcome', 'Duration', 'Attempts', 'Session', 'Principal', 'Target', 'Trace'], events.slice(0, SHOWN).map(callRow)) : notice('info', 'No calls match', 'Calls appear here as the dispatcher makes them.')}`;
  return {
    title: 'Calls',
    section: SECTION,
    lead: 'What agents called, through the dispatcher: live, newest first.',
    head: filters(f),
    live,
    follows: ['call'],
    // A task's progress has no event of its own: the page reads it again while tasks run.
    ...(tasks.toString() === '' ? {} : { pollMs: 2_000 }),
  };
}

/** `POST /tasks/cancel`: cancels a task of the console's identity; back to Calls, which says when it was not. */
export async function cancelTask(request: ConsoleRequest): Promise<Page | Redirect> {
  const taskId = request.form.get('taskId') ?? '';
  const refused = await cancelOf(request, taskId);
  if (refused === undefined) return { redirect: SECTION };
  const calls = await callsPage({ ...request, url: new URL(SECTION, request.url) });
  // Kept by the page's refreshes (console.js), above the running tasks where Cancel was.
  const failed = html`<div data-failed="${`task:${taskId}`}">${errorNotice(refused.error, `Task ${taskId} was not cancelled`)}</div>`;
  return { ...calls, live: html`${failed}${calls.live}`, status: statusOf(refused.error), address: SECTION };
}

function traceQuery(f: CallFilter, sinceMs: number | undefined): TraceQuery {
  const q: TraceQuery = { limit: QUERIED };
  if (f.trace) q.traceId = f.trace;
  if (f.tool) q.tool = f.tool;
  if (f.session) q.session = f.session;
  if (f.principal) q.principal = f.principal;
  if (f.outcome === 'ok' || f.outcome === 'error') q.outcome = f.outcome;
  if (sinceMs !== undefined) q.since = new Date(sinceMs).toISOString();
  return q;
}

/** Both lists as one, each call once, newest first. */
function merge(stored: readonly CallEvent[], heard: readonly CallEvent[]): CallEvent[] {
  const seen = new Set<string>();
  const out: CallEvent[] = [];
  for (const e of [...heard, ...stored]) {
    if (!isCallEvent(e)) continue;
    const id = `${e.callId}|${e.at}|${e.traceparent ?? ''}`;
    if (seen.has(id)) continue;
    seen.add(id);
    out.push(e);
  }
  return out.sort((x, y) => (x.at < y.at ? 1 : x.at > y.at ? -1 : 0));
}

function matches(e: CallEvent, f: CallFilter, sinceMs: number | undefined): boolean {
  if (f.trace && traceIdOf(e.traceparent) !== f.trace) return false;
  if (f.tool && e.name !== f.tool) return false;
  if ((f.outcome === 'ok' || f.outcome === 'error') && e.outcome !== f.outcome) return false;
  if (f.session && e.session !== f.session) return false;
  if (f.principal && e.principal !== f.principal) return false;
  if (sinceMs !== undefined && !(Date.parse(e.at) >= sinceMs)) return false;
  if (f.q) {
    const text = [e.name, e.session, e.principal, e.target, e.op, e.code, e.outcome, e.callId, e.traceparent]
      .join(' ')
      .toLowerCase();
    if (
      !f.q
        .toLowerCase()
        .split(/\s+/)
        .every((w) => text.includes(w))
    )
      return false;
  }
  return true;
}

/** The badge of a failed call, or of a summary of refusals: how many, and why. */
function errorText(e: CallEvent): string {
  if (e.refused !== undefined) {
    const why = Object.entries(e.refused.reasons).map(([reason, n]) => `${reason} ${n}`);
    return `${e.refused.count} refused: ${why.join(', ')}`;
  }
  if (e.code === 'approval_denied') return 'approval denied';
  return `error ${e.code ?? ''}${e.grantFailure === undefined ? '' : ` (${e.grantFailure})`}`;
}

/** Who answered a gated call, and how long it waited: under its outcome. */
function approvalNote(e: CallEvent): SafeHtml | string {
  const by =
    e.approvedBy !== undefined
      ? `approved by ${e.approvedBy}`
      : e.rejectedBy !== undefined
        ? `rejected by ${e.rejectedBy}`
        : undefined;
  if (by === undefined && e.approvalId === undefined) return '';
  const waited = e.approvalWaitMs === undefined ? '' : ` after ${(e.approvalWaitMs / 1000).toFixed(1)} s`;
  return html`<div class="sub approval" title="${e.approvalId ?? ''}">${by ?? 'not answered'}${waited}</div>`;
}

function callRow(e: CallEvent): SafeHtml {
  const trace = traceIdOf(e.traceparent);
  const outcome = e.outcome === 'ok' ? badge('ok', 'ok') : badge(errorText(e), 'error');
  const time = e.at.length >= 23 ? e.at.slice(11, 23) : e.at;
  return html`<tr data-call-id="${e.callId}"><td class="mono" title="${e.at}">${time}<div class="sub">${e.at.slice(0, 10)}</div></td>
    <td><strong class="mono">${e.name}</strong><div class="sub" title="arguments digest">${e.argumentsDigest ?? ''}</div></td>
    <td>${outcome}${approvalNote(e)}</td><td class="num">${e.durationMs.toFixed(1)} ms</td><td class="num">${e.attempts ?? ''}</td>
    <td>${e.session ? html`<a href="${href(SECTION, { session: e.session })}">${e.session}</a>` : ''}</td>
    <td>${e.principal ? html`<a href="${href(SECTION, { principal: e.principal })}">${e.principal}</a>` : ''}</td>
    <td class="mono">${e.target ?? ''} ${e.op ?? ''}</td>
    <td>${trace ? html`<a class="mono" href="${href(SECTION, { trace })}" title="${trace}">${trace.slice(0, 12)}…</a>` : ''}</td></tr>`;
}

function filters(f: CallFilter): SafeHtml {
  const input = (name: keyof CallFilter, label: string, size: number) =>
    html`<label>${label}<input name="${name}" value="${f[name]}" size="${size}" autocomplete="off"></label>`;
  const select = (name: keyof CallFilter, label: string, options: Array<[string, string]>) =>
    html`<label>${label}<select name="${name}">${options.map(([v, text]) => html`<option value="${v}" ${v === f[name] ? html`selected` : ''}>${text}</option>`)}</select></label>`;
  return html`<form class="filters" method="get" action="${SECTION}" data-instant role="search">
    ${input('q', 'search', 16)}${input('trace', 'trace id', 26)}${input('session', 'session', 10)}${input('principal', 'principal', 12)}${input('tool', 'tool', 14)}
    ${select('outcome', 'outcome', [
      ['', 'any'],
      ['ok', 'ok'],
      ['error', 'error'],
    ])}
    ${select('since', 'time', [
      ['', 'all kept'],
      ['5m', 'last 5 min'],
      ['1h', 'last hour'],
      ['24h', 'last 24 h'],
    ])}
    <button type="submit" class="secondary">Search</button></form>`;
}
