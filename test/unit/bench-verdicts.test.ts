/**
 * `npm run bench`'s verdicts (bench/report.ts), from rows made to give chosen ratios: a figure
 * short of its goal but within its guard passes and says so, one past its guard fails the run,
 * and every row prints its guard and its goal. The figures of a quiet run (issue 46: five rows
 * short of their goals) pass; each of those five pushed past its guard fails. The search's rows
 * (issue 47) are targets of the same table: a full run without them, or with a figure past its
 * guard, fails.
 */
import { describe, expect, it } from 'vitest';
import type { Figures } from '../../bench/measure.js';
import type { OtelFigures } from '../../bench/otel.js';
import { type Row, render, Scenario } from '../../bench/report.js';
import type { SearchFigures } from '../../bench/search.js';

/** The ratios the targets are made of; each 1 unless given. */
interface Ratios {
  rpsToRelay: number;
  p50ToRelay: number;
  trailOnToOff: number;
  inProcessToMoleculer: number;
  callGrant: number;
  resolveGrant: number;
  toMcpGateway: number;
  /** The MCP host's req/s ÷ the MCP gateway's; the direct stdio row is twice the host's. */
  hostToMcpGateway: number;
  resolveToRaw: number;
  uncachedToRaw: number;
  otel: number;
  /** The search's figures. */
  recallAt5: number;
  mrr: number;
  /** `$search` p50 ÷ cached `$resolve` p50, the session of 20 tools. */
  searchToResolve: number;
  indexMs: number;
  heapKibPerTool: number;
}

/** A quiet run of the 2 × EPYC box (issue 46): the five rows short of their goals, the rest met. */
const QUIET: Ratios = {
  rpsToRelay: 0.57,
  p50ToRelay: 1.29,
  trailOnToOff: 1.28,
  inProcessToMoleculer: 0.7,
  callGrant: 0.92,
  resolveGrant: 1.0,
  toMcpGateway: 11.3,
  hostToMcpGateway: 5.4,
  resolveToRaw: 1.1,
  uncachedToRaw: 1.4,
  otel: 1.01,
  // `npm run bench:search`'s run of 2026-12-06 and the labelled set's figures.
  recallAt5: 0.884,
  mrr: 0.805,
  searchToResolve: 0.93,
  indexMs: 0.37,
  heapKibPerTool: 11.65,
};

const figures = (rps: number, p50: number, cpu?: number): Figures => ({
  rps,
  p50,
  p99: p50 * 3,
  errors: 0,
  ...(cpu === undefined ? {} : { cpu: { service: cpu } }),
});

/** Rows at 1 and 64 in flight that give `r`. */
function rowsOf(r: Ratios): Row[] {
  const relay = 10_000;
  const service = relay * r.rpsToRelay;
  const at = (scenario: string, rps: number, p50 = 100, cpu?: number): Row[] => [
    { scenario, inFlight: 1, figures: figures(rps / 10, p50) },
    { scenario, inFlight: 64, figures: figures(rps, p50 * 5, cpu) },
  ];
  return [
    ...at(Scenario.Raw, 20_000, 100),
    ...at(Scenario.Relay, relay, 200),
    ...at(Scenario.Service, service, 200 * r.p50ToRelay, 20 * r.trailOnToOff),
    ...at(Scenario.ServiceUnaudited, service * 1.3, 180, 20),
    ...at(Scenario.InProcess, 10_000 * r.inProcessToMoleculer),
    ...at(Scenario.InProcessUnaudited, 10_600),
    ...at(Scenario.Moleculer, 10_000),
    ...at(Scenario.McpGateway, service / r.toMcpGateway),
    ...at(Scenario.McpHost, (service / r.toMcpGateway) * r.hostToMcpGateway),
    ...at(Scenario.McpStdio, (service / r.toMcpGateway) * r.hostToMcpGateway * 2),
    ...at(Scenario.CallGranted, 20_000 * r.callGrant),
    ...at(Scenario.CallSameStack, 20_000),
    ...at(Scenario.CallGrantBytes, 21_800),
    ...at(Scenario.ResolveGranted, 40_000 * r.resolveGrant),
    ...at(Scenario.ResolveSameStack, 40_000),
    ...at(Scenario.ResolveGrantBytes, 38_800),
    ...at(Scenario.Resolve, 40_000, 100 * r.resolveToRaw),
    ...at(Scenario.ResolveUncached, 30_000, 100 * r.uncachedToRaw),
  ];
}

function otelOf(ratio: number): OtelFigures {
  return {
    rounds: 9,
    cpuUs: [13, 13 * ratio, 16],
    rps: [45_000, 45_000, 40_000],
    ratio: [1, ratio, 1.2],
    ratioRange: [
      [1, 1],
      [ratio - 0.01, ratio + 0.01],
      [1.1, 1.3],
    ],
    observerNs: [0, 40, 900],
  };
}

function searchOf(r: Ratios): SearchFigures {
  return {
    contexts: 10_000,
    samples: 400,
    quality: { tools: 302, queries: 82, recallAt5: r.recallAt5, hitAt5: 0.9, mrr: r.mrr, misses: [] },
    sessions: [
      { tools: 20, resolveMs: 0.6, searchMs: 0.6 * r.searchToResolve },
      { tools: 300, resolveMs: 5.8, searchMs: 0.7 },
    ],
    indexMs: r.indexMs,
    firstWithResolveMs: 0.96,
    heap: { sessions: 409, mib: (r.heapKibPerTool * 8180) / 1024, perToolKib: r.heapKibPerTool, exact: true },
    seconds: 28,
  };
}

/** The report of a run of `r`; `search: null`, a run that did not measure the search. */
function report(r: Ratios, search: SearchFigures | null = searchOf(r)) {
  return render(rowsOf(r), {
    seconds: 3,
    rounds: 5,
    settleMs: 2300,
    partial: false,
    base: '',
    otel: { figures: otelOf(r.otel), inFlight: 64, seconds: 0.25 },
    search: search ?? undefined,
  });
}

/** The target table's row whose text starts with `what`, as its cells. */
function targetRow(markdown: string, what: string): string[] {
  const line = markdown.split('\n').find((l) => l.startsWith(`| ${what}`));
  if (line === undefined) throw new Error(`no target row ${what}`);
  return line
    .split('|')
    .slice(1, -1)
    .map((c) => c.trim());
}

const ROWS = {
  rpsToRelay: 'system.dispatcher req/s ÷ relay',
  p50ToRelay: 'system.dispatcher p50 ÷ relay',
  trailOnToOff: 'system.dispatcher total CPU per call, audit on ÷ off',
  inProcessToMoleculer: 'in-process dispatch, audit on, req/s ÷ Moleculer',
  callGrant: '$call with a cached grant req/s ÷ without',
} as const;

describe('the bench’s verdicts', () => {
  it('passes a quiet run whose five rows are short of their goals, saying so beside each goal', () => {
    const { markdown, failed } = report(QUIET);
    expect(failed).toBe(false);
    expect(targetRow(markdown, ROWS.rpsToRelay)).toEqual([
      expect.stringContaining(ROWS.rpsToRelay),
      '0.57',
      '≥ 0.5',
      '≥ 0.6',
      '1.00',
      'PASS, short of goal',
    ]);
    for (const what of Object.values(ROWS)) expect(targetRow(markdown, what).at(-1), what).toBe('PASS, short of goal');
    expect(targetRow(markdown, '$resolve cached p50').at(-1)).toBe('PASS, goal met');
    // Moleculer keeps no trail: the limit beside it is the same dispatch with the trail off.
    expect(targetRow(markdown, ROWS.inProcessToMoleculer)[4]).toBe('1.06');
    expect(markdown).toContain('| target | measured | guard | goal | limit | verdict |');
  });

  it.each([
    ['rpsToRelay', 0.45],
    ['p50ToRelay', 1.6],
    ['trailOnToOff', 1.4],
    ['inProcessToMoleculer', 0.55],
    ['callGrant', 0.7],
  ] as const)('fails the run when %s regresses past its guard (%s)', (name, value) => {
    const { markdown, failed } = report({ ...QUIET, [name]: value });
    expect(failed).toBe(true);
    expect(targetRow(markdown, ROWS[name]).at(-1)).toBe('MISS');
    const misses = markdown.split('\n').filter((l) => l.endsWith('| MISS |'));
    expect(misses).toHaveLength(1);
  });

  it("says the MCP host's ratio to the gateway and to the direct stdio row; below 2.5 fails the run", () => {
    const what = '$call → MCP host req/s ÷ MCP gateway (64 in flight; ÷ direct stdio 0.50)';
    expect(targetRow(report(QUIET).markdown, what)).toEqual([what, '5.40', '≥ 2.5', '≥ 4', '10.80', 'PASS, goal met']);
    const short = report({ ...QUIET, hostToMcpGateway: 2.9 });
    expect(short.failed).toBe(false);
    expect(targetRow(short.markdown, what).slice(1)).toEqual(['2.90', '≥ 2.5', '≥ 4', '5.80', 'PASS, short of goal']);
    const { markdown, failed } = report({ ...QUIET, hostToMcpGateway: 2.4 });
    expect(failed).toBe(true);
    expect(targetRow(markdown, what).at(-1)).toBe('MISS');
  });

  it('fails a full run that could not measure a target', () => {
    const { markdown, failed } = report({ ...QUIET, otel: Number.NaN });
    expect(failed).toBe(true);
    expect(targetRow(markdown, 'in-process dispatch CPU per call, OTel API').at(-1)).toBe('MISS');
  });

  describe('the search rows (issue 47)', () => {
    const SEARCH = {
      recallAt5: '$search recall@5 over',
      mrr: '$search MRR',
      searchToResolve: '$search p50 ÷ cached $resolve p50, session of 20 tools',
      indexMs: 'indexing one $register',
      heapKibPerTool: '$search index heap per tool, KiB',
    } as const;

    it('shows each with its guard and goal, and the figures in a section of their own', () => {
      const { markdown, failed } = report(QUIET);
      expect(failed).toBe(false);
      expect(targetRow(markdown, SEARCH.recallAt5).slice(1)).toEqual([
        '0.88',
        '≥ 0.85',
        '≥ 0.85',
        '',
        'PASS, goal met',
      ]);
      expect(targetRow(markdown, SEARCH.mrr).slice(1)).toEqual(['0.81', '≥ 0.78', '≥ 0.8', '', 'PASS, goal met']);
      expect(targetRow(markdown, SEARCH.searchToResolve)[0]).toContain('300 tools: 0.12');
      expect(targetRow(markdown, SEARCH.searchToResolve).slice(1)).toEqual([
        '0.93',
        '≤ 2.5',
        '≤ 2',
        '',
        'PASS, goal met',
      ]);
      expect(targetRow(markdown, SEARCH.indexMs).slice(1)).toEqual(['0.37', '≤ 1.5', '≤ 1', '', 'PASS, goal met']);
      expect(targetRow(markdown, SEARCH.heapKibPerTool).slice(1)).toEqual([
        '11.65',
        '≤ 16',
        '≤ 13',
        '',
        'PASS, goal met',
      ]);
      expect(markdown).toContain('## Search (issue 47)');
      expect(markdown).toContain('| recall@5 | 0.884 |');
    });

    it('passes a search ratio between goal and guard, saying so', () => {
      const { markdown, failed } = report({ ...QUIET, searchToResolve: 2.2 });
      expect(failed).toBe(false);
      expect(targetRow(markdown, SEARCH.searchToResolve).at(-1)).toBe('PASS, short of goal');
    });

    it.each([
      ['recallAt5', 0.84],
      ['mrr', 0.77],
      ['searchToResolve', 2.6],
      ['indexMs', 1.6],
      ['heapKibPerTool', 17],
    ] as const)('fails the run when %s is past its guard (%s)', (name, value) => {
      const { markdown, failed } = report({ ...QUIET, [name]: value });
      expect(failed).toBe(true);
      expect(targetRow(markdown, SEARCH[name]).at(-1)).toBe('MISS');
      expect(markdown.split('\n').filter((l) => l.endsWith('| MISS |'))).toHaveLength(1);
    });

    it('fails a full run that did not measure the search', () => {
      const { markdown, failed } = report(QUIET, null);
      expect(failed).toBe(true);
      expect(markdown).not.toContain('## Search (issue 47)');
      for (const what of Object.values(SEARCH)) expect(targetRow(markdown, what).at(-1), what).toBe('MISS');
    });
  });
});
