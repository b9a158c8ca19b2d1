/**
 * Try a tool: resolve a session, pick one of its tools, fill a form made from its input
 * schema, and run it through `system.dispatcher.$call` with the grant the operator pasted
 * (sent as `Matrix-Grant`) — the result shown as the model reads it. Calling is a write:
 * only a console started with `--allow-writes`, and only with its token.
 */
import { randomBytes } from 'node:crypto';
import { newTraceparent, traceIdOf } from '../../bus/headers.js';
import { Mounts } from '../../bus/subjects.js';
import type { ToolResult } from '../../dispatcher/types.js';
import type { ResolvedTool, ResolvedToolContext, ResolveRequest } from '../../registry/types.js';
import { badge, href, html, jsonBlock, notice, type SafeHtml } from '../html.js';
import { argumentFields, argumentsFrom } from '../schema-form.js';
import type { ConsoleDeps, ConsoleRequest, Page } from '../types.js';
import { errorNotice, FormError, sessionFields, sessionFrom, sessionParams, statusOf } from './common.js';

const SECTION = '/try';
/** Longest the console waits for a tool (an approval may ask a person). */
const CALL_TIMEOUT_MS = 65_000;

/** What one call produced. */
type Outcome = { result: ToolResult; traceId: string | undefined } | { error: unknown };

/** `GET /try?profile=…[&tool=…]` and `POST /try` (the call). */
export async function tryPage(request: ConsoleRequest): Promise<Page> {
  const { deps, method } = request;
  const values = method === 'POST' ? request.form : request.url.searchParams;
  let session: ResolveRequest | undefined;
  let resolved: ResolvedToolContext | undefined;
  let problem: unknown;
  try {
    session = sessionFrom(values);
    // A service that trusts grants resolves only with one: the pasted grant goes with the call's resolve too.
    const grant = values.get('grant')?.trim();
    const options = { timeoutMs: 10_000, ...(grant ? { grant } : {}) };
    if (session !== undefined)
      resolved = await deps.client.request<ResolvedToolContext>(Mounts.Tools, '$resolve', session, options);
  } catch (err) {
    problem = err;
  }
  const toolName = values.get('tool') ?? '';
  const tool = resolved?.matrixTools.find((t) => t.name === toolName);
  let outcome: Outcome | undefined;
  if (method === 'POST' && session !== undefined && problem === undefined)
    outcome = await callTool(deps, session, tool, toolName, values);
  const head = html`${deps.writes ? '' : notice('info', 'This console is read-only', 'Start it with --allow-writes to call tools; the form below shows what a call would take.')}
    <form method="get" action="${SECTION}" class="card fields">${sessionFields(values)}<div class="row"><button type="submit" class="secondary">Show its tools</button></div></form>`;
  const live = html`${problem ? errorNotice(problem, 'Resolving the session failed') : ''}
    ${resolved ? toolPicker(values, resolved, toolName) : ''}
    ${outcome ? outcomeView(outcome) : ''}
    ${tool ? callForm(values, tool, deps.writes) : toolName && resolved ? notice('error', `No tool ${toolName} in this session`) : ''}`;
  return {
    title: 'Try a tool',
    section: SECTION,
    lead: 'A form made from the tool’s input schema, run through system.dispatcher.$call; the result as the model reads it.',
    head,
    live,
    status: outcome && 'error' in outcome ? statusOf(outcome.error) : problem ? statusOf(problem) : 200,
  };
}

async function callTool(
  deps: ConsoleDeps,
  session: ResolveRequest,
  tool: ResolvedTool | undefined,
  name: string,
  values: URLSearchParams,
): Promise<Outcome> {
  const traceparent = newTraceparent();
  const field = (n: string) => values.get(n)?.trim() || undefined;
  try {
    if (!name) throw new FormError('pick a tool');
    const grant = field('grant');
    const callSession = field('callSession');
    const principal = field('principal');
    const args = tool === undefined ? {} : argumentsFrom(tool.inputSchema, values);
    const result = await deps.client.request<ToolResult>(
      Mounts.Dispatcher,
      '$call',
      { session, call: { id: `console-${randomBytes(6).toString('hex')}`, name, arguments: args } },
      {
        traceparent,
        timeoutMs: CALL_TIMEOUT_MS,
        ...(grant ? { grant } : {}),
        ...(callSession ? { session: callSession } : {}),
        ...(principal ? { principal } : {}),
      },
    );
    return { result, traceId: traceIdOf(traceparent) };
  } catch (error) {
    return { error };
  }
}

function toolPicker(values: URLSearchParams, resolved: ResolvedToolContext, current: string): SafeHtml {
  if (resolved.matrixTools.length === 0)
    return notice('info', 'This session has no bus tools', 'Pick another profile, or add refs or skills.');
  const params = sessionParams(values);
  return html`<div class="card"><h2>Tools of this session</h2><div class="chips">${resolved.matrixTools.map((t) =>
    t.name === current
      ? html`<span class="chip"><strong>${t.name}</strong></span>`
      : html`<a class="chip" href="${href(SECTION, { ...params, tool: t.name })}">${t.name}</a>`,
  )}</div></div>`;
}

function callForm(values: URLSearchParams, tool: ResolvedTool, writes: boolean): SafeHtml {
  const hidden = Object.entries(sessionParams(values)).map(([name, value]) =>
    value ? html`<input type="hidden" name="${name}" value="${value}">` : '',
  );
  return html`<form method="post" action="${SECTION}" data-write class="card fields" id="call-form">
    <h2><span class="mono">${tool.name}</span> ${tool.requiresApproval ? badge('needs approval', 'warn') : ''}</h2>
    <p class="muted">${tool.description} — <span class="mono">${tool.target} ${tool.op}</span></p>
    ${hidden}<input type="hidden" name="tool" value="${tool.name}">
    ${argumentFields(tool.inputSchema, values)}
    <details><summary>input schema</summary>${jsonBlock(tool.inputSchema)}</details>
    <label>grant <span class="hint">a signed session grant, sent as the Matrix-Grant header (PROTOCOL 3.1)</span><textarea name="grant" rows="2" autocomplete="off">${values.get('grant') ?? ''}</textarea></label>
    <div class="grid2"><label>session id <span class="hint">Matrix-Session</span><input name="callSession" value="${values.get('callSession') ?? ''}"></label>
    <label>principal <span class="hint">Matrix-Principal</span><input name="principal" value="${values.get('principal') ?? ''}"></label></div>
    <div class="row"><button type="submit" ${writes ? '' : html`disabled`}>Call ${tool.name}</button></div>
  </form>`;
}

function outcomeView(outcome: Outcome): SafeHtml {
  if ('error' in outcome)
    return html`<div id="call-result">${errorNotice(outcome.error, 'The call was not made')}</div>`;
  const { result, traceId } = outcome;
  return html`<div class="card" id="call-result">
    <h2>Result ${result.isError ? badge(`isError · ${result.error?.code ?? ''}`, 'error') : badge('ok', 'ok')} <span class="meta muted">${result.durationMs.toFixed(1)} ms</span>
      ${traceId ? html`<a href="${href('/calls', { trace: traceId })}">open its trace</a>` : ''}</h2>
    <h3>What the model reads</h3><pre class="content-model">${result.content}</pre>
    ${result.truncated ? html`<p class="muted">cut: ${result.truncated.shown} of ${result.truncated.total} characters shown</p>` : ''}
    ${result.structured === undefined ? '' : html`<details><summary>structured</summary>${jsonBlock(result.structured)}</details>`}
    <details><summary>the whole ToolResult</summary>${jsonBlock(result)}</details></div>`;
}
