/**
 * Issue 47's "done when", over the wire: the labelled catalogue (297 real MCP tools and the
 * built-ins) registered in a bucket, a session of all of it resolved in the Anthropic and OpenAI
 * formats with only the kept tools and the search tool loaded, and every labelled need asked as
 * the model would — a `tool_search` call through `system.dispatcher`, under a grant — with the
 * right tools in the top 5 as often as the quality script measures in process (recall@5 ≥ 0.85).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalogueContexts, labelledQueries, measureSearchQuality } from '../../bench/search-quality.js';
import type { BusClient } from '../../src/bus/client.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { mintGrant } from '../../src/identity/mint.js';
import { builtinContexts } from '../../src/registry/builtins.js';
import type { ResolvedToolContext, ResolveRequest, SearchReply } from '../../src/registry/types.js';
import { type SearchBus, startSearchBus } from '../harness/search.js';

const specs = catalogueContexts();
const authority = { profile: 'oracle', toolContextRefs: [...builtinContexts, ...specs].map((s) => s.key) };

describe('an oracle of 300 tools searching through the dispatcher', () => {
  let bus: SearchBus;
  let client: BusClient;
  let grant: string;

  beforeAll(async () => {
    bus = await startSearchBus(specs, 10_000);
    client = bus.client;
    grant = mintGrant(bus.issuer, { principal: 'agent:oracle', session: 's-o', resolve: authority, ttlSeconds: 600 });
  }, 60_000);
  afterAll(() => bus.stop());

  it.each(['anthropic', 'openai'] as const)(
    'loads a handful in the %s format and finds the rest',
    async (format) => {
      const session: ResolveRequest = { ...authority, format, defer: { keep: ['matrix_introspect'] } };
      const resolved = await client.request<ResolvedToolContext>('system.tools', '$resolve', session, { grant });
      expect(resolved.matrixTools.length).toBeGreaterThanOrEqual(300);
      const loaded = (resolved.providerTools ?? []).filter((t) => !('defer_loading' in t));
      expect(loaded).toHaveLength(2);
      let recall = 0;
      const queries = labelledQueries();
      for (const [i, { query, tools }] of queries.entries()) {
        const call = { id: `q-${i}`, name: 'tool_search', arguments: { query } };
        const result = await client.request<ToolResult>('system.dispatcher', '$call', { session, call }, { grant });
        expect(result.isError).toBe(false);
        const reply = result.structured as SearchReply;
        const top5 = reply.tools.map((t) => t.name);
        recall += tools.filter((t) => top5.includes(t)).length / tools.length;
        const loads =
          format === 'anthropic'
            ? (reply.providerResult as Array<{ tool_name: string }>).map((b) => b.tool_name)
            : (reply.providerResult as { tools: Array<{ function: { name: string } }> }).tools.map(
                (t) => t.function.name,
              );
        expect(loads).toEqual(top5);
      }
      const inProcess = await measureSearchQuality();
      expect(recall / queries.length).toBeCloseTo(inProcess.recallAt5, 6);
      expect(recall / queries.length).toBeGreaterThanOrEqual(0.85);
    },
    60_000,
  );
});
