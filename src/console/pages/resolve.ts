/** Resolve: a session's tools exactly as `$resolve` answers, and two resolutions side by side. */
import { Mounts } from '../../bus/subjects.js';
import type { ResolvedToolContext, ResolveRequest } from '../../registry/types.js';
import { badge, html, jsonBlock, notice, type SafeHtml, table } from '../html.js';
import type { ConsoleDeps, ConsoleRequest, Page } from '../types.js';
import { chips, contextLink, errorNotice, jsonDiff, sessionFields, sessionFrom } from './common.js';
import { toolTable } from './contexts.js';

const SECTION = '/resolve';

type Outcome = { request: ResolveRequest; reply: ResolvedToolContext } | { error: unknown } | undefined;

/** `GET /resolve?profile=…[&b.profile=…]`. */
export async function resolvePage({ url, deps }: ConsoleRequest): Promise<Page> {
  const values = url.searchParams;
  const [a, b] = await Promise.all([resolveSide(deps, values, ''), resolveSide(deps, values, 'b.')]);
  const head = html`<form method="get" action="${SECTION}" class="card fields">
    <div class="grid2">${sessionFields(values, { presentation: true, legend: 'A' })}${sessionFields(values, { prefix: 'b.', presentation: true, legend: 'B — optional, to compare with A' })}</div>
    <div class="row"><button type="submit">Resolve</button><span class="muted">Every field is sent to system.tools.$resolve as is; the result follows the registry live.</span></div>
  </form>`;
  let live: SafeHtml;
  if (a === undefined) live = notice('info', 'Pick a profile', 'Fill in A (and B to compare) and press Resolve.');
  else if (b === undefined) live = outcomeView(a, 'Resolution');
  else live = compareView(a, b);
  return {
    title: 'Resolve',
    section: SECTION,
    lead: 'Which tools a profile, worker and skills get — and what changes between two sessions.',
    head,
    live,
    follows: ['registry'],
  };
}

async function resolveSide(deps: ConsoleDeps, values: URLSearchParams, prefix: string): Promise<Outcome> {
  let request: ResolveRequest | undefined;
  try {
    request = sessionFrom(values, prefix);
    if (request === undefined) return undefined;
    return {
      request,
      reply: await deps.client.request<ResolvedToolContext>(Mounts.Tools, '$resolve', request, { timeoutMs: 10_000 }),
    };
  } catch (error) {
    return { error };
  }
}

function outcomeView(outcome: Exclude<Outcome, undefined>, title: string): SafeHtml {
  if ('error' in outcome) return errorNotice(outcome.error, `${title} failed`);
  const { reply, request } = outcome;
  return html`<div class="card"><h2>${title}</h2><dl class="facts">
      <dt>request</dt><dd><code>${JSON.stringify(request)}</code></dd>
      <dt>contexts</dt><dd>${reply.contexts.length ? reply.contexts.map((k) => html`${contextLink(k)} `) : html`<span class="muted">none</span>`}</dd>
      <dt>timeout</dt><dd>${reply.timeoutMs} ms</dd><dt>revision</dt><dd>${reply.revision}</dd>
      <dt>digest</dt><dd><code class="digest">${reply.digest}</code></dd>
      <dt>SDK tools</dt><dd>${chips(reply.sdkTools)}</dd></dl></div>
    <div class="card"><h2>Tools (${reply.matrixTools.length})</h2>${toolTable(reply.matrixTools, reply.timeoutMs)}</div>
    <div class="card"><h2>Diagnostics (${reply.diagnostics.length})</h2>${diagnostics(reply)}</div>
    <div class="card"><h2>Instructions</h2>${reply.instructions ? html`<pre>${reply.instructions}</pre>` : html`<p class="muted">None.</p>`}</div>
    <div class="grid2"><div class="card"><h2>Environment requirements</h2>${jsonBlock(reply.environmentRequirements)}</div>
      <div class="card"><h2>Verification</h2>${jsonBlock(reply.verification)}</div></div>
    ${reply.providerTools ? html`<div class="card"><h2>Provider tools</h2>${jsonBlock(reply.providerTools)}</div>` : ''}
    <details class="card"><summary>The reply as $resolve sent it</summary>${jsonBlock(reply, 'json reply')}</details>`;
}

function diagnostics(reply: ResolvedToolContext): SafeHtml {
  if (reply.diagnostics.length === 0) return html`<p class="muted">None.</p>`;
  const tone = (level: string) => (level === 'error' ? 'error' : level === 'warning' ? 'warn' : 'info');
  return table(
    ['Level', 'Code', 'Message', 'Context', 'Tool'],
    reply.diagnostics.map(
      (d) => html`<tr><td>${badge(d.level, tone(d.level))}</td><td class="mono">${d.code}</td><td>${d.message}</td>
        <td>${d.context ? contextLink(d.context) : ''}</td><td class="mono">${d.tool ?? ''}</td></tr>`,
    ),
  );
}

function compareView(a: Exclude<Outcome, undefined>, b: Exclude<Outcome, undefined>): SafeHtml {
  if ('error' in a || 'error' in b)
    return html`<div class="grid2"><div>${outcomeView(a, 'A')}</div><div>${outcomeView(b, 'B')}</div></div>`;
  return html`${summary(a.reply, b.reply)}
    <div class="card"><h2>Side by side</h2>${jsonDiff(a.reply, b.reply, ['A', 'B'], 'The two replies are identical.')}</div>
    <div class="grid2"><div>${outcomeView(a, 'A')}</div><div>${outcomeView(b, 'B')}</div></div>`;
}

function summary(a: ResolvedToolContext, b: ResolvedToolContext): SafeHtml {
  const names = (r: ResolvedToolContext) => new Map(r.matrixTools.map((t) => [t.name, JSON.stringify(t)]));
  const [ta, tb] = [names(a), names(b)];
  const onlyA = [...ta.keys()].filter((n) => !tb.has(n));
  const onlyB = [...tb.keys()].filter((n) => !ta.has(n));
  const changed = [...ta.keys()].filter((n) => tb.has(n) && tb.get(n) !== ta.get(n));
  const ctxOnly = (x: string[], y: string[]) => x.filter((k) => !y.includes(k));
  const same = a.digest === b.digest;
  return html`<div class="card" id="diff-summary"><h2>A → B ${same ? badge('same digest', 'ok') : badge('different digest', 'warn')}</h2><dl class="facts">
    <dt>tools only in A</dt><dd>${chips(onlyA)}</dd><dt>tools only in B</dt><dd>${chips(onlyB)}</dd><dt>tools that differ</dt><dd>${chips(changed)}</dd>
    <dt>contexts only in A</dt><dd>${chips(ctxOnly(a.contexts, b.contexts))}</dd><dt>contexts only in B</dt><dd>${chips(ctxOnly(b.contexts, a.contexts))}</dd>
    <dt>diagnostics</dt><dd>${a.diagnostics.length} → ${b.diagnostics.length}</dd><dt>timeout</dt><dd>${a.timeoutMs} → ${b.timeoutMs} ms</dd></dl></div>`;
}
