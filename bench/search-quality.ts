/**
 * `npm run quality:search`: how well `$search` finds the right tool. Mounts the labelled
 * catalogue (test/fixtures/search/catalogue.json: 297 tools of 26 real MCP servers, as PROTOCOL 12
 * mounts them) beside the built-in contexts in one registry, resolves one session over all of
 * them, asks each labelled need (test/fixtures/search/queries.json) through `Registry.search` — the
 * code `system.tools.$search` runs — and prints recall@5, hit@5 and MRR. `test/unit/search-quality.test.ts`
 * runs it and holds recall@5 ≥ 0.85. `--misses` lists the queries whose right tools are not all
 * in the top 5.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { SearchOptions } from 'minisearch';
import { builtinContexts } from '../src/registry/builtins.js';
import { Registry } from '../src/registry/registry.js';
import { ToolSearch } from '../src/registry/search/searcher.js';
import { SEARCH_OPTIONS } from '../src/registry/search/session-index.js';
import { StaticStore, storedBuiltin } from '../src/registry/store.js';
import type { JsonSchemaObject, SearchReply, ToolContextSpec } from '../src/registry/types.js';

// Read from bench/ (the test) or dist/bench/ (the script).
const root = import.meta.url.includes('/dist/bench/') ? '../../' : '../';
const fixture = (name: string) =>
  readFileSync(fileURLToPath(new URL(`${root}test/fixtures/search/${name}`, import.meta.url)), 'utf8');

/** One server of the catalogue, as its package lists its tools. */
interface CatalogueServer {
  server: string;
  package: string;
  tools: Array<{ name: string; description: string; inputSchema: JsonSchemaObject }>;
}

/** One labelled need. */
interface LabelledQuery {
  query: string;
  /** The tools that answer it. */
  tools: string[];
}

/** How the search did over the labelled set. */
export interface SearchQuality {
  /** Tools searched. */
  tools: number;
  queries: number;
  /** Mean over queries of the share of its right tools in the top 5. */
  recallAt5: number;
  /** Share of queries with a right tool in the top 5. */
  hitAt5: number;
  /** Mean reciprocal rank of the first right tool (0 when none is in the top 50). */
  mrr: number;
  /** The queries that missed a right tool in the top 5, with what came instead. */
  misses: Array<{ query: string; right: string[]; top5: string[] }>;
}

/** The catalogue as contexts: `mcp.<server>`, tools named `<server>_<tool>` unless already so prefixed. */
export function catalogueContexts(): ToolContextSpec[] {
  const { servers } = JSON.parse(fixture('catalogue.json')) as { servers: CatalogueServer[] };
  return servers.map((s) => ({
    key: `mcp.${s.server}`,
    title: s.server,
    description: `Tools of the MCP server ${s.package}`,
    matrixTools: s.tools.map((t) => ({
      name: t.name.startsWith(`${s.server}_`) || t.name.startsWith(`${s.server}-`) ? t.name : `${s.server}_${t.name}`,
      description: t.description,
      inputSchema: t.inputSchema,
      target: `mcp.${s.server}`,
      op: '$call',
    })),
    permissions: { approval: 'never' },
  }));
}

/** The labelled needs. */
export function labelledQueries(): LabelledQuery[] {
  return (JSON.parse(fixture('queries.json')) as { queries: LabelledQuery[] }).queries;
}

/**
 * Runs every labelled query against a registry of the catalogue and the built-ins; `options`
 * replace the search's own (`SEARCH_OPTIONS`) for a trial.
 */
export async function measureSearchQuality(options?: SearchOptions): Promise<SearchQuality> {
  const specs = catalogueContexts();
  const store = new StaticStore(
    [
      ...builtinContexts.map(storedBuiltin),
      ...specs.map((spec, i) => ({ spec, source: 'registered' as const, revision: i + 1 })),
    ],
    specs.length,
  );
  const registry = new Registry(store);
  const session = { profile: 'quality', toolContextRefs: [...builtinContexts, ...specs].map((s) => s.key) };
  const resolved = await registry.resolve(session);
  const trial = new ToolSearch(1, options);
  const queries = labelledQueries();
  let recall = 0;
  let hits = 0;
  let reciprocal = 0;
  const misses: SearchQuality['misses'] = [];
  for (const { query, tools } of queries) {
    const reply: SearchReply =
      options === undefined
        ? await registry.search({ session, query, limit: 50 })
        : trial.find('trial', resolved, query, 50);
    const ranked = reply.tools.map((t) => t.name);
    const top5 = ranked.slice(0, 5);
    const found = tools.filter((t) => top5.includes(t)).length;
    recall += found / tools.length;
    if (found > 0) hits++;
    const first = ranked.findIndex((name) => tools.includes(name));
    if (first >= 0) reciprocal += 1 / (first + 1);
    if (found < tools.length) misses.push({ query, right: tools, top5 });
  }
  const n = queries.length;
  return {
    tools: resolved.matrixTools.length,
    queries: n,
    recallAt5: recall / n,
    hitAt5: hits / n,
    mrr: reciprocal / n,
    misses,
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // SEARCH_TRIAL='{"boost":{"name":1}}' tries other MiniSearch search options over the defaults.
  const trial = process.env.SEARCH_TRIAL;
  const q = await measureSearchQuality(trial === undefined ? undefined : { ...SEARCH_OPTIONS, ...JSON.parse(trial) });
  console.log(
    `${q.queries} queries over ${q.tools} tools: recall@5 ${q.recallAt5.toFixed(3)}, hit@5 ${q.hitAt5.toFixed(3)}, MRR ${q.mrr.toFixed(3)}`,
  );
  if (process.argv.includes('--misses'))
    for (const m of q.misses) console.log(`- ${m.query}: want ${m.right.join(', ')}; top 5 ${m.top5.join(', ')}`);
}
