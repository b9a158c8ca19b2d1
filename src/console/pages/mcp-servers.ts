/**
 * MCP servers: every MCP server hosted on the bus (PROTOCOL 12) as `matrix-tools mcp servers`
 * finds it — its state, its tools as agents see them, and the definition changes held until an
 * operator accepts them, each shown as a diff of the accepted definition and the one the server
 * lists now. Accept sends `mcp.<name>.$accept`, the op `matrix-tools mcp accept` sends, on the
 * console's own NATS user: whoever the bus lets accept from the CLI may accept here (under
 * deploy/nats.conf, the operator), and the console adds its own guard on writes (--allow-writes
 * and the token).
 */
import {
  acceptMcpChanges,
  type HostIntrospect,
  type IntrospectedChange,
  introspectMcpMounts,
} from '../../mcp/host/listing.js';
import { badge, href, html, notice, type SafeHtml, table } from '../html.js';
import type { ConsoleRequest, LiveKind, Page, Redirect } from '../types.js';
import { contextLink, errorNotice, FormError, jsonDiff, statusOf } from './common.js';

const SECTION = '/mcp';
/** How long discovery waits for answers, in ms. */
const DISCOVERY_WAIT_MS = 300;
/** How often the page refreshes, in ms (a server's state changes without a registry event). */
const REFRESH_MS = 5_000;

/** A mount name as a host serves one: `mcp.<name>` (PROTOCOL 12). */
const MOUNT = /^mcp\.[a-z0-9_-]{1,32}$/;
/** A definition's digest: SHA-256, hex. */
const DIGEST = /^[0-9a-f]{64}$/;

/** An accept that was not taken: which change, and why. */
interface Failed {
  error: unknown;
  mount: string;
  tool: string;
}

/** `GET /mcp`: every hosted MCP server; `failed`, an accept that was not taken. */
export async function mcpServersPage(request: ConsoleRequest, failed?: Failed): Promise<Page> {
  const { deps, url } = request;
  const found = await introspectMcpMounts(deps.client, deps.index.keys('mcp.'), DISCOVERY_WAIT_MS);
  const accepted = url.searchParams.get('accepted');
  const held = found.reduce((n, s) => n + (s.held?.length ?? 0), 0);
  // A failure whose change is no longer listed (accepted elsewhere, gone) says why on top.
  const orphan =
    failed !== undefined && !found.some((s) => s.mount === failed.mount && s.held?.some((h) => h.tool === failed.tool));
  const live = html`${accepted ? notice('ok', `Accepted ${accepted}`, `in ${url.searchParams.get('mount') ?? '?'}: agents now see the definition the server lists`) : ''}
    ${orphan ? failure(failed) : ''}
    <p class="muted">${found.length} ${found.length === 1 ? 'server' : 'servers'} · ${held} held ${held === 1 ? 'change' : 'changes'}</p>
    ${found.length ? found.map((s) => serverCard(s, deps.writes, failed)) : notice('info', 'No MCP server is hosted on this bus', html`Host one with <code>matrix-tools serve --mcp-servers FILE</code> or <code>matrix-tools mcp-host --mcp-servers FILE</code> (docs/mcp-host.md).`)}`;
  return {
    title: 'MCP servers',
    section: SECTION,
    lead: 'The MCP servers hosted on the bus as mounts mcp.<name>: their state, their tools, and the definition changes held until you accept them.',
    live,
    follows: ['registry'] as LiveKind[],
    pollMs: REFRESH_MS,
    ...(failed === undefined ? {} : { address: SECTION, status: statusOf(failed.error) }),
  };
}

/** `POST /mcp/accept`: accepts one held change (`mcp accept <name> <tool>`); back to the list, which says so. */
export async function acceptChange(request: ConsoleRequest): Promise<Page | Redirect> {
  const mount = request.form.get('mount') ?? '';
  const tool = request.form.get('tool') ?? '';
  const after = request.form.get('after') ?? '';
  try {
    if (!MOUNT.test(mount)) throw new FormError(`not an MCP mount: ${JSON.stringify(mount.slice(0, 64))}`);
    if (tool === '' || tool.length > 256) throw new FormError('name the tool whose change to accept');
    if (!DIGEST.test(after)) throw new FormError('the form names no digest of the change shown: reload the page');
    // Only the definition the person was shown: a server that lists yet another one since is not taken.
    const { accepted } = await acceptMcpChanges(request.deps.client, mount, [tool], { [tool]: after });
    if (!accepted.includes(tool))
      throw new FormError(
        `${mount} holds no change of ${tool} with the definition shown (${after.slice(0, 12)}) now: accepted elsewhere, or listed again since — look at it again`,
      );
  } catch (error) {
    return mcpServersPage(request, { error, mount, tool });
  }
  return { redirect: href(SECTION, { accepted: tool, mount }) };
}

function failure(failed: Failed): SafeHtml {
  return html`<div data-failed="${`mcp:${failed.mount}:${failed.tool}`}">${errorNotice(failed.error, 'The change was not accepted')}</div>`;
}

const STATE_TONE: Record<string, 'ok' | 'info' | 'error'> = {
  ready: 'ok',
  starting: 'info',
  restarting: 'info',
  failed: 'error',
};

function serverCard(s: HostIntrospect, writes: boolean, failed: Failed | undefined): SafeHtml {
  const tone = STATE_TONE[s.state] ?? 'error';
  const server = `${s.server?.title ?? s.server?.name ?? ''} ${s.server?.version ?? ''}`.trim();
  const tools = s.tools ?? [];
  const rows = tools.map(
    (t) => html`<tr><td class="mono">${t.name}</td><td class="mono">${t.tool}</td>
      <td>${t.held ? badge('change held', 'warn') : badge('pinned', 'ok')}</td><td>${t.gated ? badge('approval', 'warn') : '—'}</td>
      <td class="mono sub" title="${t.digest}">${t.digest.slice(0, 12)}</td></tr>`,
  );
  const leftOut = s.leftOut ?? [];
  return html`<section class="card mcp-server" data-mcp-server="${s.mount}" id="${s.mount}">
    <h2><span class="mono">${s.mount}</span> ${badge(s.state, tone)} ${badge(`${s.instances ?? 0} ${s.instances === 1 ? 'instance' : 'instances'}`)}</h2>
    <dl class="facts"><dt>server</dt><dd>${server || '—'}</dd><dt>context</dt><dd>${contextLink(s.mount)}</dd>
    ${s.restarts ? html`<dt>restarts</dt><dd>${s.restarts}</dd>` : ''}
    ${s.lastError ? html`<dt>last error</dt><dd>${s.lastError}</dd>` : ''}</dl>
    ${(s.held ?? []).map((h) => heldCard(s.mount, h, writes, failed?.mount === s.mount && failed.tool === h.tool ? failed : undefined))}
    ${s.unanswered === undefined ? html`<h3>Tools (${tools.length})</h3>${table(['Name', 'MCP tool', 'Definition', 'Gated', 'Digest'], rows)}` : ''}
    ${leftOut.length ? html`<h3>Left out</h3><ul>${leftOut.map((l) => html`<li><span class="mono">${l.tool}</span>: ${l.reason}</li>`)}</ul>` : ''}
  </section>`;
}

/** One held change: its digests, the diff of the accepted and the listed definition, and Accept. */
function heldCard(mount: string, h: IntrospectedChange, writes: boolean, failed: Failed | undefined): SafeHtml {
  const slot = `mcp:${mount}:${h.tool}`;
  const diff = h.definitionsOmitted
    ? notice(
        'info',
        'The definitions are too large to show here',
        html`Compare them with <code>nats req '${mount}.$introspect' '{}'</code> after fewer changes are held, or on the server.`,
      )
    : jsonDiff(h.pinned, h.definition, ['accepted', 'listed now'], 'The definitions are identical.');
  const title =
    h.change === 'added' ? 'a new tool, not offered until accepted' : 'changed; calls are refused until accepted';
  return html`<div class="held" data-held-tool="${h.tool}" data-slot="${slot}">
    <h3><span class="mono">${h.tool}</span> ${badge(h.change === 'added' ? 'new tool held' : 'change held', 'warn')} <span class="muted">${title}</span></h3>
    <p class="muted mono digests">${h.before ? html`${h.before.slice(0, 12)} → ` : ''}${h.after.slice(0, 12)}</p>
    ${diff}
    <form method="post" action="${SECTION}/accept" data-write class="row">
      <input type="hidden" name="mount" value="${mount}"><input type="hidden" name="tool" value="${h.tool}"><input type="hidden" name="after" value="${h.after}">
      <button type="submit" ${writes ? '' : html`disabled title="start the console with --allow-writes"`}>Accept ${h.tool}</button>
    </form>${failed === undefined ? '' : failure(failed)}</div>`;
}
