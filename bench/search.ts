/**
 * `$search` at scale (issue 47), measured by `npm run bench` (its search rows and targets) and
 * alone by `npm run bench:search` (this file run as a script: the same figures and verdicts).
 * Starts a nats-server of its own, writes 10,000 contexts of 10 tools each into a bucket (their
 * names, descriptions and schemas drawn from the labelled catalogue of real MCP tools, renamed
 * per context), serves `system.tools` on it in this process, and measures at 1 in flight over the
 * bus: a cached `$resolve`'s p50 and `$search`'s p50 for the same session (2 contexts: 20 tools;
 * and 30 contexts: 300 tools), the cost of indexing one `$register` that changes a searched
 * session (the first search after it, in process, against a warm one), and the heap the session
 * indexes take (exact with `node --expose-gc`). With it, the quality over the labelled set
 * (bench/search-quality.ts). Targets: bench/report.ts (`searchTargets`). About 30 s;
 * `SEARCH_SIZE=1000` for a quicker run.
 */

import { fileURLToPath } from 'node:url';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient } from '../src/bus/client.js';
import { connectBus } from '../src/bus/connect.js';
import { KvContextStore } from '../src/registry/kv-store.js';
import { Registry } from '../src/registry/registry.js';
import { registryMount } from '../src/registry/system-tools.js';
import type { MatrixToolProjection, ResolveRequest, ToolContextSpec } from '../src/registry/types.js';
import { startNatsProcess } from '../test/harness/nats-server.js';
import { latencyP50, median } from './measure.js';
import { searchLines, searchTargets, type Target, Verdict, verdictOf } from './report.js';
import { catalogueContexts, labelledQueries, measureSearchQuality, type SearchQuality } from './search-quality.js';

const N = Number(process.env.SEARCH_SIZE ?? 10_000);
/** Tools per context. */
export const TOOLS = 10;
const SAMPLES = 400;
const CHANGES = 15;
const bucket = 'bench-search';
const keyOf = (i: number) => `ctx-${String(i).padStart(6, '0')}`;
const real: MatrixToolProjection[] = catalogueContexts().flatMap((c) => c.matrixTools ?? []);

/** Context `i`: 10 real tools (a window of the catalogue), named for the context. */
function context(i: number, variant = 0): ToolContextSpec {
  const key = keyOf(i);
  return {
    key,
    title: `Context ${key}`,
    description: `Tools of ${key}`,
    matrixTools: Array.from({ length: TOOLS }, (_, k) => {
      const tool = real[(i * TOOLS + k) % real.length] as MatrixToolProjection;
      const description = k === 0 && variant > 0 ? `${tool.description} (revision ${variant})` : tool.description;
      return { ...tool, name: `c${i}_${k}_${tool.name}`.slice(0, 64), description, target: `app.${key}` };
    }),
    permissions: { approval: 'never' },
  };
}

/** A session's two p50s over the bus, ms. */
export interface SessionLatency {
  /** Its tools. */
  tools: number;
  /** A cached `$resolve` (the better of the runs before and after the searches). */
  resolveMs: number;
  /** `$search` of a labelled need. */
  searchMs: number;
}

/** What the search rows of `npm run bench` are made of. */
export interface SearchFigures {
  /** Contexts registered (10 tools each). */
  contexts: number;
  /** Calls per p50. */
  samples: number;
  /** Over the labelled set. */
  quality: SearchQuality;
  /** The session of 20 tools, then the one of 300. */
  sessions: SessionLatency[];
  /** Indexing one `$register` that changes the searched session: its first search − a warm one, in process, ms. */
  indexMs: number;
  /** The first search after such a `$register`, its resolution included, in process, ms. */
  firstWithResolveMs: number;
  /** The heap of as many 20-tool session indexes as the default bound holds. */
  heap: { sessions: number; mib: number; perToolKib: number; exact: boolean };
  /** What measuring took, s (the nats-server, the bucket's writing, every figure). */
  seconds: number;
}

/** Measures the search: quality in process, then speed and memory at `contexts` × 10 tools on a nats-server of its own. */
export async function measureSearch(contexts = N, log: (line: string) => void = () => {}): Promise<SearchFigures> {
  const began = performance.now();
  const quality = await measureSearchQuality();
  const nats = await startNatsProcess(['-m', '0']);
  const serving = await connectBus({ servers: nats.url, name: 'bench-search-service' });
  const calling = await connectBus({ servers: nats.url, name: 'bench-search-client' });
  try {
    log(`$search: writing ${contexts} contexts of ${TOOLS} tools…`);
    await populate(serving, contexts);
    const store = await KvContextStore.open(serving, { bucket, loadTimeoutMs: 600_000 });
    const registry = new Registry(store);
    const mount = await registryMount(serving, { registry }).start();
    const client = new BusClient(calling, { timeoutMs: 30_000 });
    const queries = labelledQueries().map((q) => q.query);
    let q = 0;
    const small: ResolveRequest = { profile: 'bench', toolContextRefs: [keyOf(17), keyOf(4242 % contexts)] };
    const large: ResolveRequest = {
      profile: 'bench',
      toolContextRefs: Array.from({ length: 30 }, (_, k) => keyOf((k * 331) % contexts)),
    };
    const sessions: SessionLatency[] = [];
    for (const session of [small, large]) {
      const resolve = () => client.request('system.tools', '$resolve', session);
      const search = () => client.request('system.tools', '$search', { session, query: queries[q++ % queries.length] });
      const resolved = await p50(resolve);
      const searched = await p50(search);
      const again = await p50(resolve);
      const latency = {
        tools: (session.toolContextRefs?.length ?? 0) * TOOLS,
        resolveMs: Math.min(resolved, again),
        searchMs: searched,
      };
      sessions.push(latency);
      log(
        `$search, session of ${latency.tools} tools: p50 ${ms(latency.searchMs)} ms, cached $resolve ${ms(latency.resolveMs)} ms`,
      );
    }
    const indexing = await indexingCost(registry, small);
    const heap = heapOfIndexes(registry, contexts);
    client.close();
    await mount.stop();
    store.close();
    return {
      contexts,
      samples: SAMPLES,
      quality,
      sessions,
      indexMs: indexing.index,
      firstWithResolveMs: indexing.firstWithResolve,
      heap,
      seconds: (performance.now() - began) / 1000,
    };
  } finally {
    await calling.close();
    await serving.close();
    await nats.stop();
  }
}

/** `npm run bench:search`: the search's figures and targets alone, as `npm run bench` shows them. */
async function main(): Promise<void> {
  const figures = await measureSearch(N, (line) => process.stderr.write(`${line}\n`));
  const targets: Target[] = searchTargets(figures);
  const sign = (t: Target) => (t.kind === 'max' ? '≤' : '≥');
  process.stdout.write(
    [
      ...searchLines(figures),
      '| target | measured | guard | goal | verdict |',
      '|---|---|---|---|---|',
      ...targets.map(
        (t) => `| ${t.what} | ${t.value.toFixed(2)} | ${sign(t)} ${t.guard} | ${sign(t)} ${t.goal} | ${verdictOf(t)} |`,
      ),
      '',
    ].join('\n'),
  );
  process.exitCode = targets.some((t) => verdictOf(t) === Verdict.Miss) ? 1 : 0;
}

/**
 * The cost of one `$register` to the search: after each of `CHANGES` updates of a context of the
 * session, the first in-process search (resolution excluded) against a warm one; and the first
 * search with its resolution (in process).
 */
async function indexingCost(registry: Registry, session: ResolveRequest) {
  const firsts: number[] = [];
  const warms: number[] = [];
  const withResolve: number[] = [];
  const key = session.toolContextRefs?.[0] as string;
  const i = Number(key.slice(4));
  for (let v = 1; v <= CHANGES; v++) {
    const { revision } = await registry.register({ spec: context(i, v) });
    while (registry.store.revision < revision) await new Promise((r) => setTimeout(r, 1));
    const resolved = await registry.resolve(session);
    // The session's own index follows the change by difference.
    let t = performance.now();
    registry.searches.find('bench-session', resolved, 'read a file');
    firsts.push(performance.now() - t);
    t = performance.now();
    registry.searches.find('bench-session', resolved, 'read a file');
    warms.push(performance.now() - t);
    const { revision: next } = await registry.register({ spec: context(i, v + 100) });
    while (registry.store.revision < next) await new Promise((r) => setTimeout(r, 1));
    t = performance.now();
    await registry.search({ session, query: 'read a file' });
    withResolve.push(performance.now() - t);
  }
  return { index: Math.max(0, median(firsts) - median(warms)), firstWithResolve: median(withResolve) };
}

/** Heap taken by as many 20-tool session indexes as the searcher keeps by default (8,192 tools). */
function heapOfIndexes(registry: Registry, contexts: number): SearchFigures['heap'] {
  const gc = (globalThis as { gc?: () => void }).gc;
  const sessions = Math.floor(8_192 / (2 * TOOLS));
  // Resolved first and held: the heap measured is the indexes' alone.
  const resolutions = Array.from({ length: sessions }, (_, s) =>
    registry.resolve({ profile: 'heap', toolContextRefs: [keyOf((s * 7) % contexts), keyOf((s * 13 + 1) % contexts)] }),
  ) as Array<Awaited<ReturnType<Registry['resolve']>>>;
  gc?.();
  const before = process.memoryUsage().heapUsed;
  for (const [s, resolved] of resolutions.entries()) registry.searches.find(`heap|${s}`, resolved, 'read a file');
  gc?.();
  const bytes = process.memoryUsage().heapUsed - before;
  return { sessions, mib: bytes / 2 ** 20, perToolKib: bytes / 1024 / (sessions * 2 * TOOLS), exact: gc !== undefined };
}

async function populate(nc: NatsConnection, n: number): Promise<void> {
  const kv = await new Kvm(nc).create(bucket, { history: 1 });
  for (let i = 0; i < n; i += 1000) {
    await Promise.all(
      Array.from({ length: Math.min(1000, n - i) }, (_, k) => kv.put(keyOf(i + k), JSON.stringify(context(i + k)))),
    );
  }
}

/** Median ms of `op` at 1 in flight over `SAMPLES` calls, after 20 unmeasured ones. */
const p50 = (op: () => Promise<unknown>) => latencyP50(op, SAMPLES, 20);

const ms = (v: number) => v.toFixed(3);

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
