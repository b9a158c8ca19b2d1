/**
 * The search's quality bound (issue 47): over the labelled set — 297 tools of 26 real MCP servers
 * and the built-ins, 82 needs as a user would phrase them — recall@5 ≥ 0.85, by the script that
 * prints the figures (bench/search-quality.ts, `npm run quality:search`).
 */
import { describe, expect, it } from 'vitest';
import { catalogueContexts, labelledQueries, measureSearchQuality } from '../../bench/search-quality.js';
import { builtinContexts } from '../../src/registry/builtins.js';

describe('search quality over the labelled set', () => {
  it('labels only tools of the catalogue, at least 60 needs over at least 300 tools', () => {
    const names = new Set(
      [...builtinContexts, ...catalogueContexts()].flatMap((c) => (c.matrixTools ?? []).map((t) => t.name)),
    );
    expect(names.size).toBeGreaterThanOrEqual(300);
    const queries = labelledQueries();
    expect(queries.length).toBeGreaterThanOrEqual(60);
    expect(queries.flatMap((q) => q.tools).filter((t) => !names.has(t))).toEqual([]);
  });

  it('finds the right tools in the top 5: recall@5 ≥ 0.85', async () => {
    const q = await measureSearchQuality();
    console.log(
      `search quality: ${q.queries} queries over ${q.tools} tools: recall@5 ${q.recallAt5.toFixed(3)}, hit@5 ${q.hitAt5.toFixed(3)}, MRR ${q.mrr.toFixed(3)}`,
    );
    expect(q.tools).toBeGreaterThanOrEqual(300);
    expect(q.recallAt5).toBeGreaterThanOrEqual(0.85);
    expect(q.mrr).toBeGreaterThan(0.7);
  });
});
