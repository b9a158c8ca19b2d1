/**
 * What `npm run bench` prints and writes to bench/RESULTS.md: the rows, the CPU each process
 * spent per call, the search's figures, and issue 25's targets (and 17's, 42's and 47's), each
 * with its guard (past it, a regression: MISS), its goal, the limit this box allows where a limit
 * row exists, and its verdict. Every ratio is from the one run.
 */
import { cpus, totalmem } from 'node:os';
import type { Figures } from './measure.js';
import { type OtelFigures, otelSection } from './otel.js';
import type { SearchFigures } from './search.js';

/** The rows the targets are computed from, by name. */
export const Scenario = {
  Raw: 'raw nats.js request',
  Ceiling: 'ceiling (one inbox, no timer)',
  CeilingHeaders: 'ceiling + context headers',
  Relay: 'ceiling + headers, two hops (relay)',
  InProcess: 'dispatch, in-process library',
  InProcessUnaudited: 'dispatch, in-process, audit off',
  Service: 'dispatch, via system.dispatcher',
  ServiceUnaudited: 'dispatch, via system.dispatcher, audit off',
  ServiceBase: 'dispatch, via system.dispatcher, base commit',
  CallGranted: '$call with a cached grant',
  CallSameStack: '$call, same stack, no grant',
  CallGrantBytes: "$call, same stack, no grant, the grant's bytes",
  Resolve: '$resolve, cached',
  ResolveGranted: '$resolve, cached, with a grant',
  ResolveSameStack: '$resolve, cached, same stack, no grant',
  ResolveGrantBytes: "$resolve, cached, same stack, no grant, the grant's bytes",
  ResolveUncached: '$resolve, uncached, 10k contexts',
  List: '$list page of 100 of 10k',
  Moleculer: 'Moleculer 0.14 broker.call',
  McpStdio: 'MCP SDK tools/call, stdio',
  McpGateway: 'MCP gateway (Streamable HTTP → stdio)',
  McpHost: '$call → MCP host → stdio server',
} as const;

export interface Row {
  scenario: string;
  inFlight: number;
  figures: Figures;
}

/**
 * One target row. The goal is where the project wants the figure; the guard, where the runs
 * recorded in docs/benchmarks.md put it with the box's run-to-run spread and a margin. Past the
 * guard is a regression (MISS: the bench exits 1); between guard and goal, a PASS short of the
 * goal, which the row says.
 */
export interface Target {
  what: string;
  /** The measured value: a ratio, or µs of CPU per call. */
  value: number;
  /** Where the project wants the value. */
  goal: number;
  /** Past this the value is a regression: the run fails. */
  guard: number;
  /** `max`: the value must be at most goal and guard; `min`: at least. */
  kind: 'max' | 'min';
  /** What this machine allows for the same figure, where a limit row bounds it. */
  limit?: number;
}

/** A target's verdict: past its guard, within it but short of the goal, or at the goal. */
export const Verdict = { Miss: 'MISS', Pass: 'PASS, short of goal', Met: 'PASS, goal met' } as const;
export type Verdict = (typeof Verdict)[keyof typeof Verdict];

/** The verdict of one target (a figure not measured, NaN, meets nothing: a MISS). */
export function verdictOf(t: Target): Verdict {
  const within = (bound: number) => (t.kind === 'max' ? t.value <= bound : t.value >= bound);
  if (!within(t.guard)) return Verdict.Miss;
  return within(t.goal) ? Verdict.Met : Verdict.Pass;
}

/** The in-flight level of the CPU table and of every throughput target. */
export const CPU_TABLE_IN_FLIGHT = 64;

/** Total CPU per call of a row at 64 in flight, µs, summed over every process measured. */
export function totalCpu(f: Figures | undefined): number {
  if (f?.cpu === undefined) return NaN;
  return Object.values(f.cpu).reduce((sum, us) => sum + (Number.isFinite(us) ? us : 0), 0);
}

/** Issue 25's targets (and issue 17's), from this run's rows; `partial` leaves out those whose rows were not measured. */
export function targetsOf(
  get: (scenario: string, inFlight: number) => Figures | undefined,
  otel: OtelFigures | undefined,
  partial: boolean,
  base: string,
  search?: SearchFigures,
): Target[] {
  const n = CPU_TABLE_IN_FLIGHT;
  const rps = (s: string) => get(s, n)?.rps ?? NaN;
  const p50 = (s: string) => get(s, 1)?.p50 ?? NaN;
  const targets: Target[] = [
    {
      what: `system.dispatcher req/s ÷ relay (${n} in flight)`,
      value: rps(Scenario.Service) / rps(Scenario.Relay),
      goal: 0.6,
      guard: 0.5,
      kind: 'min',
      limit: 1,
    },
    {
      what: 'system.dispatcher p50 ÷ relay (1 in flight)',
      value: p50(Scenario.Service) / p50(Scenario.Relay),
      goal: 1.15,
      guard: 1.5,
      kind: 'max',
      limit: 1,
    },
    {
      what: `system.dispatcher total CPU per call, audit on ÷ off (${n} in flight)`,
      value: totalCpu(get(Scenario.Service, n)) / totalCpu(get(Scenario.ServiceUnaudited, n)),
      goal: 1.15,
      guard: 1.35,
      kind: 'max',
      limit: 1,
    },
    {
      what: `in-process dispatch, audit on, req/s ÷ Moleculer (${n} in flight)`,
      value: rps(Scenario.InProcess) / rps(Scenario.Moleculer),
      goal: 1.0,
      guard: 0.6,
      kind: 'min',
      // Moleculer keeps no trail: what the same dispatch does with the trail off.
      limit: rps(Scenario.InProcessUnaudited) / rps(Scenario.Moleculer),
    },
    {
      what: `system.dispatcher req/s ÷ MCP gateway (${n} in flight)`,
      value: rps(Scenario.Service) / rps(Scenario.McpGateway),
      goal: 8,
      guard: 8,
      kind: 'min',
    },
    {
      // The limit: the same server called directly by the SDK client, no bus and no host.
      what: `$call → MCP host req/s ÷ MCP gateway (${n} in flight; ÷ direct stdio ${(rps(Scenario.McpHost) / rps(Scenario.McpStdio)).toFixed(2)})`,
      value: rps(Scenario.McpHost) / rps(Scenario.McpGateway),
      // Issue 42's bound is the goal. The guard: two runs of 1 s slices on a busy shared box gave 5.40 and 2.91.
      goal: 4,
      guard: 2.5,
      kind: 'min',
      limit: rps(Scenario.McpStdio) / rps(Scenario.McpGateway),
    },
    {
      what: `$call with a cached grant req/s ÷ without, one stack (${n} in flight)`,
      value: rps(Scenario.CallGranted) / rps(Scenario.CallSameStack),
      goal: 0.95,
      guard: 0.75,
      kind: 'min',
      limit: rps(Scenario.CallGrantBytes) / rps(Scenario.CallSameStack),
    },
    {
      what: `$resolve cached with a grant req/s ÷ without, one stack (${n} in flight)`,
      value: rps(Scenario.ResolveGranted) / rps(Scenario.ResolveSameStack),
      goal: 0.95,
      guard: 0.75,
      kind: 'min',
      limit: rps(Scenario.ResolveGrantBytes) / rps(Scenario.ResolveSameStack),
    },
    ...(base === ''
      ? []
      : [
          {
            what: `plain $call req/s ÷ the service of ${base} (${n} in flight)`,
            value: rps(Scenario.Service) / rps(Scenario.ServiceBase),
            goal: 0.95,
            guard: 0.9,
            kind: 'min' as const,
          },
        ]),
    {
      what: '$resolve cached p50 ÷ raw request (1 in flight)',
      value: p50(Scenario.Resolve) / p50(Scenario.Raw),
      goal: 1.2,
      guard: 1.5,
      kind: 'max',
    },
    {
      what: '$resolve uncached, 10k contexts, p50 ÷ raw request (1 in flight)',
      value: p50(Scenario.ResolveUncached) / p50(Scenario.Raw),
      goal: 1.5,
      guard: 1.8,
      kind: 'max',
    },
    {
      what: `in-process dispatch CPU per call, OTel API with no SDK ÷ no observer (issue 17; median over ${otel?.rounds ?? 0} rounds)`,
      value: otel?.ratio[1] ?? NaN,
      goal: 1.05,
      guard: 1.1,
      kind: 'max',
    },
    ...searchTargets(search),
  ];
  // A full run that could not measure one misses it (NaN meets no bound).
  return partial ? targets.filter((t) => Number.isFinite(t.value)) : targets;
}

/**
 * Issue 47's targets from the search's figures (NaN without them). Quality is deterministic (the
 * same code and labelled set give the same figures), so its guards sit at the issue's bound
 * (recall@5) and just under the figure recorded (MRR 0.805): a change of weights that loses
 * either fails. The speed bounds are the issue's as goals, with the box's spread as the guard
 * (two runs of `bench:search` gave 1.19 and 1.49; indexing 0.42–0.54 ms); memory has no bound in
 * the issue: its goal is what docs/search.md states (about 12 KiB a tool), its guard a third more.
 */
export function searchTargets(search: SearchFigures | undefined): Target[] {
  const q = search?.quality;
  const [small, large] = search?.sessions ?? [];
  const ratio = (s: SearchFigures['sessions'][number] | undefined) =>
    s === undefined ? NaN : s.searchMs / s.resolveMs;
  const size = (search?.contexts ?? 10_000).toLocaleString('en');
  return [
    {
      what: `$search recall@5 over ${q === undefined ? 'the labelled needs' : `${q.queries} labelled needs, ${q.tools} real tools`} (issue 47)`,
      value: q?.recallAt5 ?? NaN,
      goal: 0.85,
      guard: 0.85,
      kind: 'min',
    },
    {
      what: '$search MRR over the same needs',
      value: q?.mrr ?? NaN,
      goal: 0.8,
      guard: 0.78,
      kind: 'min',
    },
    {
      what: `$search p50 ÷ cached $resolve p50, session of ${small?.tools ?? 20} tools, ${size} contexts × 10 (1 in flight; ${large?.tools ?? 300} tools: ${ratio(large).toFixed(2)})`,
      value: ratio(small),
      goal: 2,
      guard: 2.5,
      kind: 'max',
    },
    {
      what: 'indexing one $register into a searched session, ms (in process)',
      value: search?.indexMs ?? NaN,
      goal: 1,
      guard: 1.5,
      kind: 'max',
    },
    {
      what: `$search index heap per tool, KiB (${search?.heap.sessions ?? 409} session indexes of 20 tools${search?.heap.exact === false ? '; no --expose-gc: rough' : ''})`,
      value: search?.heap.perToolKib ?? NaN,
      goal: 13,
      guard: 16,
      kind: 'max',
    },
  ];
}

/** The search's figures as a table (`npm run bench`'s search section, and `npm run bench:search`). */
export function searchLines(search: SearchFigures): string[] {
  const ms = (v: number) => v.toFixed(3);
  const q = search.quality;
  return [
    `Over the labelled set (bench/search-quality.ts): ${q.queries} needs over ${q.tools} tools. At ${search.contexts.toLocaleString('en')} contexts × 10 real tools on a nats-server of its own, one \`system.tools\` in the bench process; p50 at 1 in flight over ${search.samples} calls. Measured in ${search.seconds.toFixed(1)} s.`,
    '',
    '| figure | value |',
    '|---|---|',
    `| recall@5 | ${q.recallAt5.toFixed(3)} |`,
    `| hit@5 | ${q.hitAt5.toFixed(3)} |`,
    `| MRR | ${q.mrr.toFixed(3)} |`,
    ...search.sessions.flatMap((s) => [
      `| session of ${s.tools} tools: cached \`$resolve\` p50, ms | ${ms(s.resolveMs)} |`,
      `| session of ${s.tools} tools: \`$search\` p50, ms | ${ms(s.searchMs)} |`,
      `| session of ${s.tools} tools: \`$search\` ÷ cached \`$resolve\` | ${(s.searchMs / s.resolveMs).toFixed(2)} |`,
    ]),
    `| indexing one \`$register\` that changes the searched session (first search − warm, in process), ms | ${ms(search.indexMs)} |`,
    `| first search after such a \`$register\`, its resolution included (in process), ms | ${ms(search.firstWithResolveMs)} |`,
    `| heap of ${search.heap.sessions} session indexes of 20 tools (the default bound: 8,192 tools), MiB | ${search.heap.mib.toFixed(1)} |`,
    `| heap per indexed tool, KiB | ${search.heap.perToolKib.toFixed(2)} |`,
    '',
  ];
}

/** Issue 16's targets that issue 25 withdrew, and why (shown beside this run's figures). */
const WITHDRAWN = [
  '`system.dispatcher` req/s ≥ 0.33 × the ceiling and p50 ≤ 1.8 × raw: the relay (two hops that do nothing) reaches about 0.36 × the ceiling and 2.0–2.2 × raw on this box, so no dispatcher could meet them; replaced by the bounds against the relay.',
  'in-process dispatch ≥ 0.7 × the ceiling, ≥ 1.25 × Moleculer, p50 ≤ 1.0 × raw: replaced by ≥ 1.0 × Moleculer with the audit trail on.',
  '`$resolve` cached ≤ 8 µs of service CPU a call: replaced by the latency bound (p50 ≤ 1.2 × raw), which is what a caller sees.',
];

export function render(
  rows: Row[],
  options: {
    seconds: number;
    rounds: number;
    settleMs: number;
    partial: boolean;
    /** The commit the plain `$call` is compared with ('' for none). */
    base: string;
    rss?: { big: number; empty: number };
    otel?: { figures: OtelFigures; inFlight: number; seconds: number };
    /** The search's figures (issue 47); a full run without them misses its search targets. */
    search?: SearchFigures;
  },
): { markdown: string; failed: boolean } {
  const get = (scenario: string, inFlight: number) =>
    rows.find((r) => r.scenario === scenario && r.inFlight === inFlight)?.figures;
  const raw = (n: number) => get(Scenario.Raw, n) as Figures;
  const relay = (n: number) => get(Scenario.Relay, n);
  const ratio = (a: number, b: number | undefined) => (b === undefined ? '' : (a / b).toFixed(2));
  const lines = rows.map(
    ({ scenario, inFlight, figures: f }) =>
      `| ${scenario} | ${inFlight} | ${f.p50.toFixed(0)} | ${f.p99.toFixed(0)} | ${f.rps.toFixed(0)}${f.errors ? ` (${f.errors} errors)` : ''} | ${ratio(f.p50, raw(inFlight).p50)} | ${ratio(f.rps, raw(inFlight).rps)} | ${ratio(f.p50, relay(inFlight)?.p50)} | ${ratio(f.rps, relay(inFlight)?.rps)} |`,
  );
  const targets = targetsOf(get, options.otel?.figures, options.partial, options.base, options.search);
  const n = CPU_TABLE_IN_FLIGHT;
  const processes = Object.keys(rows.find((r) => r.figures.cpu !== undefined)?.figures.cpu ?? {});
  const cpuLines = rows
    .filter((r) => r.inFlight === n && r.figures.cpu !== undefined)
    .map(({ scenario, figures }) => {
      const cpu = figures.cpu as Record<string, number>;
      return `| ${scenario} | ${processes.map((p) => (cpu[p] as number).toFixed(1)).join(' | ')} | ${totalCpu(figures).toFixed(1)} |`;
    });
  const sign = (t: Target) => (t.kind === 'max' ? '≤' : '≥');
  const targetLines = targets.map(
    (t) =>
      `| ${t.what} | ${t.value.toFixed(2)} | ${sign(t)} ${t.guard} | ${sign(t)} ${t.goal} | ${t.limit === undefined ? '' : t.limit.toFixed(2)} | ${verdictOf(t)} |`,
  );
  const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}`;
  const markdown = [
    '# Benchmark results',
    '',
    `Run ${new Date().toISOString()} on ${machine}; one nats-server on loopback with an account each for the service as shipped, the grant A/B (one process serving in two accounts: trusting a grant issuer, trusting callers), the service with the audit trail off and (when compared) the service of an earlier commit; one echo target answering in all of them; each service and peer in its own process; ${options.seconds} s per scenario and concurrency, in ${options.rounds} interleaved rounds. Produced by \`npm run bench\`.`,
    '',
    '| scenario | in flight | p50 µs | p99 µs | req/s | p50 ÷ raw | req/s ÷ raw | p50 ÷ relay | req/s ÷ relay |',
    '|---|---|---|---|---|---|---|---|---|',
    ...lines,
    '',
    `## CPU per call at ${n} in flight`,
    '',
    `µs of CPU each process spent per completed call (from \`/proc\` and \`process.cpuUsage\`), read ${options.settleMs} ms after each slice ends so that work a slice left behind (the audit batches, the trace-id indexer's flush) is charged to it. The bench process is the caller: raw request, ceiling, the in-process dispatcher, and the Moleculer and MCP clients run in it. With every process on the same two cores, the total bounds throughput.`,
    '',
    `| scenario | ${processes.join(' | ')} | total |`,
    `|---|${processes.map(() => '---').join('|')}|---|`,
    ...cpuLines,
    '',
    ...(options.otel === undefined
      ? []
      : otelSection(options.otel.figures, options.otel.inFlight, options.otel.seconds)),
    ...(options.search === undefined ? [] : ['## Search (issue 47)', '', ...searchLines(options.search)]),
    '## Targets (issues 25, 17, 42 and 47, from this run)',
    '',
    "A figure past its guard is a regression: the row says MISS and the bench exits 1. The goal is where the project wants it; a figure within the guard but short of the goal passes and says so (on this protocol several goals sit at or past what the box allows: docs/benchmarks.md). The limit is what this box allows for the same figure: the relay (two hops that do nothing) for the dispatcher, no audit trail for its cost, the same dispatch with the trail off for Moleculer (which keeps none), the grant's text sent unchecked for a grant (what its bytes cost the caller, nats-server and the service that reads them, which no check can save), the SDK client calling the same stdio server directly for the MCP host. The search's speed is against a cached `$resolve` of the same session in the same minutes.",
    '',
    '| target | measured | guard | goal | limit | verdict |',
    '|---|---|---|---|---|---|',
    ...targetLines,
    '',
    '### Withdrawn',
    '',
    ...WITHDRAWN.map((w) => `- ${w}`),
    '',
    ...(options.rss === undefined
      ? []
      : [
          '## Memory',
          '',
          `Registry RSS with 10,000 registered contexts of 20 tools each: ${options.rss.big.toFixed(0)} MiB (with none: ${options.rss.empty.toFixed(0)} MiB).`,
          '',
        ]),
  ].join('\n');
  return { markdown, failed: targets.some((t) => verdictOf(t) === Verdict.Miss) };
}
