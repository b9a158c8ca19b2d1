/**
 * Mounts: what answers NATS services discovery now — each mount's ops, instances and `$SRV.STATS`.
 * The mounts `system.agents` lists are asked by name (`$SRV.INFO|STATS.<service name>`, which
 * only a mount's own user hears under deploy/nats.conf), the rest on the whole bus.
 */
import { discoverByName, type EndpointStats } from '../../bus/discovery.js';
import { Mounts, serviceName } from '../../bus/subjects.js';
import { describeMounts, infoAnswers, type MountDescription } from '../../reference-mounts/agents.js';
import { badge, html, notice, type SafeHtml, table } from '../html.js';
import type { ConsoleRequest, Page } from '../types.js';

const SECTION = '/mounts';
/** How long discovery waits for answers, in ms. */
const DISCOVERY_WAIT_MS = 300;
/** How often the page refreshes, in ms. */
const REFRESH_MS = 3_000;

/** What `$SRV.STATS` says of one instance (ADR-32). */
interface StatsReply {
  name: string;
  id: string;
  version?: string;
  started?: string;
  endpoints?: EndpointStats[];
}

/** One op's figures summed over a mount's instances. */
interface OpFigures {
  op: string;
  requests: number;
  errors: number;
  /** Total processing time, ns. */
  processingNs: number;
  lastError: string;
}

/** `GET /mounts`. */
export async function mountsPage({ deps }: ConsoleRequest): Promise<Page> {
  const listed = await deps.client
    .request<{ mounts?: MountDescription[] }>(Mounts.Agents, '$introspect', {}, { timeoutMs: 5_000 })
    .then((r) => (Array.isArray(r.mounts) ? r.mounts.map((m) => String(m.mount)) : []))
    .catch(() => [] as string[]);
  const [infos, stats] = await Promise.all([
    infoAnswers(deps.nc, listed, DISCOVERY_WAIT_MS),
    statsAnswers(deps, listed),
  ]);
  const mounts = describeMounts(infos);
  // An instance's STATS goes with the mount its INFO was grouped under, by instance id, so the
  // two always agree on what a mount is called.
  const mountOfInstance = new Map(infos.map((i) => [i.id, describeMounts([i])[0]?.mount]));
  const instances = mounts.reduce((n, m) => n + m.instances, 0);
  const cards = mounts.map((m) => {
    const own = stats.filter((s) => mountOfInstance.get(s.id) === m.mount);
    return mountCard(
      m.mount,
      m.description,
      m.version,
      own,
      m.ops.map((o) => o.op),
    );
  });
  const live = html`<p class="muted">${mounts.length} mounts · ${instances} instances · refreshed ${utcTime(new Date().toISOString())} every ${REFRESH_MS / 1000} s</p>
    ${mounts.length ? html`<div class="mounts">${cards}</div>` : notice('info', 'Nothing answers $SRV.PING', 'Start the service (npm start) or a mount.')}`;
  return {
    title: 'Mounts',
    section: SECTION,
    lead: 'The live mounts on the bus, from NATS services discovery ($SRV.INFO and $SRV.STATS).',
    live,
    pollMs: REFRESH_MS,
  };
}

/** `$SRV.STATS` answers: of each listed mount, on its by-name subject; of the rest, on the whole bus. */
async function statsAnswers(deps: ConsoleRequest['deps'], listed: readonly string[]): Promise<StatsReply[]> {
  const { all, byName } = await discoverByName<StatsReply>(
    deps.nc,
    'STATS',
    listed.map(serviceName),
    DISCOVERY_WAIT_MS,
    { wholeBus: true },
  );
  return [...[...byName.values()].flat(), ...all.filter((s) => !byName.has(s.name))];
}

function mountCard(
  mount: string,
  description: string | undefined,
  version: string | undefined,
  stats: readonly StatsReply[],
  ops: readonly string[],
): SafeHtml {
  const figures = sumByOp(mount, stats, ops);
  const rows = figures.map(
    (f) => html`<tr><td class="mono">${f.op}</td><td class="num">${f.requests.toLocaleString('en')}</td>
      <td class="num">${f.errors ? badge(f.errors.toLocaleString('en'), 'error') : '0'}</td>
      <td class="num">${f.requests ? `${(f.processingNs / f.requests / 1e6).toFixed(2)} ms` : '—'}</td><td class="sub">${f.lastError}</td></tr>`,
  );
  const started = stats.map(
    (s) => html`<span class="chip" title="${s.started ? `started ${utcTime(s.started)}` : ''}">${s.id}</span>`,
  );
  return html`<section class="card" data-mount="${mount}">
    <h2>${mount} ${badge(`${stats.length || 1} ${stats.length === 1 ? 'instance' : 'instances'}`, 'ok')} ${version ? badge(`v${version}`) : ''}</h2>
    ${description ? html`<p class="muted">${description}</p>` : ''}
    ${mount.startsWith('mcp.') ? html`<p><a href="${`/mcp#${mount}`}">Its MCP server: state, tools, held definition changes</a></p>` : ''}
    ${table(['Op', 'Requests', 'Errors', 'Average', 'Last error'], rows)}
    <h3>Instances</h3><div class="chips">${started}</div></section>`;
}

/** Each op's requests, errors and time, summed over the instances that answered STATS. */
function sumByOp(mount: string, stats: readonly StatsReply[], ops: readonly string[]): OpFigures[] {
  const byOp = new Map<string, OpFigures>(
    ops.map((op) => [op, { op, requests: 0, errors: 0, processingNs: 0, lastError: '' }]),
  );
  for (const s of stats) {
    for (const e of s.endpoints ?? []) {
      const op = e.subject?.startsWith(`${mount}.`) ? e.subject.slice(mount.length + 1) : (e.subject ?? e.name);
      const f = byOp.get(op) ?? { op, requests: 0, errors: 0, processingNs: 0, lastError: '' };
      f.requests += Number(e.num_requests) || 0;
      f.errors += Number(e.num_errors) || 0;
      f.processingNs += Number(e.processing_time) || 0;
      if (e.last_error) f.lastError = String(e.last_error);
      byOp.set(op, f);
    }
  }
  return [...byOp.values()];
}

/**
 * A moment as the page writes every one, `2026-12-06 07:01:02 UTC`: the refresh and the
 * instances' starts alike (NATS gives the latter in RFC 3339, to the nanosecond).
 */
export function utcTime(rfc3339: string): string {
  const at = new Date(rfc3339);
  return Number.isNaN(at.getTime()) ? rfc3339 : `${at.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}
