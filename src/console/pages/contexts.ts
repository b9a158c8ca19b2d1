/**
 * Contexts: every context, searched and paged on the server; the tools of the contexts listed,
 * ranked by `$search`; one context in full; register and unregister.
 */
import { Mounts } from '../../bus/subjects.js';
import type { ListedContext, RegisterReply, ResolvedTool, ResolvedToolContext } from '../../registry/types.js';
import { badge, type HtmlValue, href, html, jsonBlock, notice, type SafeHtml, table } from '../html.js';
import { pager } from '../layout.js';
import type { ConsoleRequest, Page, Redirect } from '../types.js';
import { chips, contextLink, errorNotice, FormError, statusOf } from './common.js';
import { toolSearchResults } from './tool-search.js';

const SECTION = '/contexts';

/** `GET /contexts?q=&source=&page=&tools=`. */
export async function contextsPage(request: ConsoleRequest, problem?: { error: unknown; spec: string }): Promise<Page> {
  const { url, deps } = request;
  const q = url.searchParams.get('q') ?? '';
  const toolQuery = (url.searchParams.get('tools') ?? '').trim();
  const sourceParam = url.searchParams.get('source');
  const source = sourceParam === 'built-in' || sourceParam === 'registered' ? sourceParam : undefined;
  const found = deps.index.search({ q, source, page: Number(url.searchParams.get('page')) || 1 });
  const at = (page: number) =>
    href(SECTION, { q, source, page: page === 1 ? undefined : page, tools: toolQuery || undefined });
  const from = found.total === 0 ? 0 : (found.page - 1) * found.pageSize + 1;
  const unregistered = url.searchParams.get('unregistered');
  const head = html`
    ${unregistered ? notice('ok', `Unregistered ${unregistered}`) : ''}
    <form class="filters" method="get" action="${SECTION}" data-instant role="search">
      <label>search <span class="hint">key, title, description, tool, capability</span><input name="q" value="${q}" size="40" autofocus></label>
      <label>source<select name="source">${['', 'built-in', 'registered'].map(
        (s) => html`<option value="${s}" ${s === (source ?? '') ? html`selected` : ''}>${s || 'any'}</option>`,
      )}</select></label>
      <label>find a tool <span class="hint">what it should do, among the contexts listed</span><input name="tools" value="${toolQuery}" size="30"></label>
      <button type="submit" class="secondary">Search</button>
    </form>
    ${deps.writes ? registerForm(problem) : ''}`;
  const rows = found.items.map(contextRow);
  const tools = await toolSearchResults(
    deps.client,
    found.items.map((c) => c.key),
    toolQuery,
  );
  const live = html`
    ${tools}
    ${deps.index.error ? notice('error', 'The registry did not answer $list', deps.index.error) : ''}
    <p class="muted">${deps.index.size.toLocaleString('en')} contexts · registry revision ${deps.index.revision}</p>
    ${table(['Key', 'Title', 'Source', 'Tools', 'Provides', 'Requires', 'Rev'], rows)}
    ${pager({ from, to: from + found.items.length - (found.total === 0 ? 0 : 1), total: found.total }, found.page > 1 ? at(found.page - 1) : undefined, found.page < found.pages ? at(found.page + 1) : undefined)}`;
  return {
    title: 'Contexts',
    section: SECTION,
    lead: 'Every context of tools, built in or registered, live as the registry changes.',
    head,
    live,
    follows: ['registry'],
    status: problem ? statusOf(problem.error) : 200,
  };
}

function contextRow(c: ListedContext): SafeHtml {
  return html`<tr data-key="${c.key}"><td>${contextLink(c.key)}</td><td>${c.title}<div class="sub">${c.description}</div></td>
    <td>${badge(c.source, c.source === 'built-in' ? 'info' : 'muted')}</td><td>${chips(c.tools)}</td>
    <td>${chips(c.provides)}</td><td>${chips(c.requires)}</td><td class="num">${c.revision}</td></tr>`;
}

function registerForm(problem: { error: unknown; spec: string } | undefined): SafeHtml {
  return html`<details class="card" ${problem ? html`open` : ''}><summary>Register a context</summary>
    ${problem ? errorNotice(problem.error, 'Not registered') : ''}
    <form method="post" action="${SECTION}" data-write class="fields">
      <label>spec <span class="hint">a ToolContextSpec as JSON</span><textarea name="spec" rows="10">${problem?.spec ?? ''}</textarea></label>
      <div class="row"><label>expected revision <span class="hint">0 = only if new</span><input name="expectedRevision" size="8"></label><button type="submit">Register</button></div>
    </form></details>`;
}

/** `POST /contexts`: `$register`, then to the context's page. */
export async function registerContext(request: ConsoleRequest): Promise<Page | Redirect> {
  const text = request.form.get('spec') ?? '';
  try {
    let spec: unknown;
    try {
      spec = JSON.parse(text);
    } catch (err) {
      throw new FormError(`the spec is not JSON: ${(err as Error).message}`);
    }
    const expected = request.form.get('expectedRevision')?.trim();
    const body = expected ? { spec, expectedRevision: Number(expected) } : { spec };
    const reply = await request.deps.client.request<RegisterReply>(Mounts.Tools, '$register', body);
    await request.deps.index.refresh([reply.key]);
    return { redirect: href(`${SECTION}/${encodeURIComponent(reply.key)}`, { registered: reply.revision }) };
  } catch (error) {
    return contextsPage(request, { error, spec: text });
  }
}

/** `POST /contexts/<key>/unregister`. */
export async function unregisterContext(request: ConsoleRequest, key: string): Promise<Page | Redirect> {
  try {
    await request.deps.client.request(Mounts.Tools, '$unregister', { key });
    await request.deps.index.refresh([key]);
    return { redirect: href(SECTION, { unregistered: key }) };
  } catch (error) {
    return contextPage(request, key, error);
  }
}

/** `GET /contexts/<key>`: the context with its tools' schemas, as resolving it alone shows them. */
export async function contextPage(request: ConsoleRequest, key: string, problem?: unknown): Promise<Page> {
  const { deps, url } = request;
  const listed = deps.index.get(key);
  const base = { title: listed?.title ?? key, section: SECTION, follows: ['registry' as const] };
  if (listed === undefined) {
    return {
      ...base,
      status: 404,
      live: notice(
        'error',
        `No context ${key}`,
        html`The registry lists no context with this key. <a href="${SECTION}">All contexts</a>`,
      ),
    };
  }
  let resolved: ResolvedToolContext | undefined;
  let failure: unknown;
  try {
    resolved = await deps.client.request<ResolvedToolContext>(
      Mounts.Tools,
      '$resolve',
      { profile: 'console', toolContextRefs: [key] },
      { timeoutMs: 5_000 },
    );
  } catch (err) {
    failure = err;
  }
  const registered = url.searchParams.get('registered');
  const head = html`${registered ? notice('ok', `Registered ${key} at revision ${registered}`) : ''}${problem ? errorNotice(problem, 'Not unregistered') : ''}`;
  const live = html`<div class="card">${facts(listed, resolved)}${deps.writes && listed.source === 'registered' ? unregisterForm(key) : ''}</div>
    ${failure ? errorNotice(failure, 'Resolving it alone failed') : resolved ? resolvedParts(key, resolved) : ''}`;
  // After a refused unregister, the context's page (its refresh would read the POST's path).
  const address = problem === undefined ? {} : { address: `${SECTION}/${encodeURIComponent(key)}` };
  return { ...base, lead: listed.description, head, live, ...address };
}

function facts(c: ListedContext, resolved: ResolvedToolContext | undefined): SafeHtml {
  const own = resolved?.matrixTools.filter((t) => t.context === c.key) ?? [];
  const gated = own.filter((t) => t.requiresApproval).map((t) => t.name);
  const approval =
    own.length === 0
      ? '—'
      : gated.length === own.length
        ? 'every call'
        : gated.length === 0
          ? 'never'
          : `for ${gated.join(', ')}`;
  const allowTargets = own.find((t) => t.allowTargets)?.allowTargets;
  const row = (name: string, value: HtmlValue) => html`<dt>${name}</dt><dd>${value}</dd>`;
  return html`<dl class="facts">
    ${row('key', html`<code>${c.key}</code>`)}${row('source', badge(c.source, c.source === 'built-in' ? 'info' : 'muted'))}${row('revision', c.revision)}
    ${row('provides', chips(c.provides))}${row('requires', chips(c.requires))}
    ${row('approval', approval)}${row('allowed targets', chips(allowTargets, 'none (no matrix_invoke)'))}
    ${resolved ? row('timeout', `${resolved.timeoutMs} ms`) : ''}
    ${resolved?.sdkTools.length ? row('SDK tools', chips(resolved.sdkTools)) : ''}
  </dl>`;
}

function unregisterForm(key: string): SafeHtml {
  return html`<form method="post" action="${`${SECTION}/${encodeURIComponent(key)}/unregister`}" data-write class="row"><button type="submit" class="danger">Unregister ${key}</button></form>`;
}

function resolvedParts(key: string, resolved: ResolvedToolContext): SafeHtml {
  const others = resolved.contexts.filter((k) => k !== key);
  return html`
    ${others.length ? notice('info', 'Resolving it alone also brings in', html`${others.map((k) => html`${contextLink(k)} `)}(providers of what it requires)`) : ''}
    <div class="card"><h2>Tools</h2>${toolTable(
      resolved.matrixTools.filter((t) => t.context === key),
      resolved.timeoutMs,
    )}</div>
    ${resolved.instructions ? html`<div class="card"><h2>Instructions</h2><pre>${resolved.instructions}</pre></div>` : ''}
    <div class="grid2"><div class="card"><h2>Environment requirements</h2>${jsonBlock(resolved.environmentRequirements)}</div>
    <div class="card"><h2>Verification</h2>${jsonBlock(resolved.verification)}</div></div>`;
}

/**
 * The tools of a resolution, each with its input schema; a tool without a timeout of its own
 * shows the resolution's (`sessionTimeoutMs`), which the dispatcher waits instead.
 */
export function toolTable(tools: readonly ResolvedTool[], sessionTimeoutMs: number): SafeHtml {
  if (tools.length === 0) return html`<p class="muted">No bus tools.</p>`;
  const hints = (t: ResolvedTool) =>
    Object.entries(t.annotations ?? {})
      .filter(([, on]) => on)
      .map(([name]) => name);
  return table(
    ['Tool', 'Context', 'Target', 'Gate', 'Result', 'Timeout', 'Hints'],
    tools.map(
      (
        t,
      ) => html`<tr data-tool="${t.name}"><td><strong class="mono">${t.name}</strong><div class="sub">${t.description}</div>
        <details><summary>input schema</summary>${jsonBlock(t.inputSchema)}</details></td>
        <td>${contextLink(t.context)}</td><td class="mono">${t.target} ${t.op}</td>
        <td>${t.requiresApproval ? badge('approval', 'warn') : badge('none')}</td><td>${t.resultMode}</td>
        <td class="num">${t.timeoutMs === undefined ? html`${sessionTimeoutMs} ms<div class="sub">the session’s</div>` : `${t.timeoutMs} ms`}</td><td>${chips(hints(t), '')}</td></tr>`,
    ),
  );
}
