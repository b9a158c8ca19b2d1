/**
 * Deferred loading in the provider formats (PROTOCOL 13) and `$search`'s answer in each
 * provider's result shape, against a registry in this process: past the threshold every tool but
 * the kept ones is `defer_loading`, the search tool is added (and is a session tool the dispatcher
 * runs), strict mode still holds for what is loaded, and the digest stays deterministic.
 */
import { describe, expect, it } from 'vitest';
import type { McpTool } from '../../src/registry/provider-tools.js';
import { Registry } from '../../src/registry/registry.js';
import { mcpListedTools } from '../../src/registry/search/mcp-view.js';
import { ToolSearch } from '../../src/registry/search/searcher.js';
import { SessionIndex } from '../../src/registry/search/session-index.js';
import { StaticStore } from '../../src/registry/store.js';
import type { ResolveRequest, SearchReply, ToolContextSpec } from '../../src/registry/types.js';

/** A context of `n` tools, `tool_0` … `tool_{n-1}`, each with an optional argument. */
function wide(n: number, key = 'wide'): ToolContextSpec {
  return {
    key,
    title: 'Wide',
    description: 'many tools',
    matrixTools: Array.from({ length: n }, (_, i) => ({
      name: `tool_${i}`,
      description:
        i === 7 ? 'Convert a temperature from Celsius to Fahrenheit' : `Tool number ${i} of the wide context`,
      inputSchema: { type: 'object', properties: { value: { type: 'number', description: 'The amount.' } } },
      target: 'app.wide',
      op: `$op${i}`,
    })),
    permissions: { approval: 'never' },
  };
}

const registry = (...specs: ToolContextSpec[]) =>
  new Registry(
    new StaticStore(
      specs.map((spec, i) => ({ spec, source: 'registered' as const, revision: i + 1 })),
      specs.length,
    ),
  );

describe('$resolve with defer', () => {
  const session = (more: Partial<ResolveRequest>): ResolveRequest => ({
    profile: 'agent',
    toolContextRefs: ['wide'],
    ...more,
  });

  it('defers all but the kept tools in the anthropic format and adds tool_search', async () => {
    const r = await registry(wide(40)).resolve(session({ format: 'anthropic', defer: { keep: ['tool_3'] } }));
    const tools = r.providerTools as Array<{ name: string; defer_loading?: true; input_schema: unknown }>;
    expect(tools).toHaveLength(41);
    expect(tools.filter((t) => t.defer_loading !== true).map((t) => t.name)).toEqual(['tool_3', 'tool_search']);
    expect(r.matrixTools.at(-1)).toMatchObject({ name: 'tool_search', target: 'system.tools', op: '$search' });
    expect(r.diagnostics).toContainEqual(expect.objectContaining({ code: 'tools_deferred' }));
  });

  it('defers in the openai format with a client tool_search, strict rules still holding', async () => {
    const r = await registry(wide(40)).resolve(
      session({ format: 'openai', strict: true, defer: { keep: ['tool_1', 'gone'], threshold: 10 } }),
    );
    const tools = r.providerTools as unknown as Array<Record<string, unknown>>;
    const loaded = tools.filter((t) => t.defer_loading !== true);
    expect(loaded.map((t) => t.type)).toEqual(['function', 'tool_search']);
    expect(loaded[0]).toMatchObject({
      function: { name: 'tool_1', strict: true, parameters: { additionalProperties: false, required: ['value'] } },
    });
    expect(loaded[1]).toMatchObject({ type: 'tool_search', execution: 'client', parameters: { required: ['query'] } });
    expect(tools.filter((t) => t.defer_loading === true)).toHaveLength(39);
    expect(r.diagnostics).toContainEqual(expect.objectContaining({ code: 'defer_keep_unknown' }));
  });

  it('changes nothing at or below the threshold, nor in the matrix and mcp formats', async () => {
    const reg = registry(wide(30));
    for (const format of ['anthropic', 'openai'] as const) {
      const plain = await reg.resolve(session({ format }));
      const deferred = await reg.resolve(session({ format, defer: {} }));
      expect(deferred.digest).toBe(plain.digest);
    }
    const many = registry(wide(40));
    for (const format of ['matrix', 'mcp'] as const) {
      const plain = await many.resolve(session({ format }));
      expect((await many.resolve(session({ format, defer: { threshold: 1 } }))).digest).toBe(plain.digest);
    }
  });

  it('gives the same digest and order from a fresh registry', async () => {
    const request = session({ format: 'anthropic', defer: { threshold: 5 } });
    const a = await registry(wide(40)).resolve(request);
    const b = await registry(wide(40)).resolve(request);
    expect(b.digest).toBe(a.digest);
    expect(b.providerTools).toEqual(a.providerTools);
  });
});

describe('$search in this process', () => {
  it('answers in each provider’s result shape: tool_reference blocks, tool_search_output', async () => {
    const reg = registry(wide(40));
    const anthropic = (await reg.search({
      session: { profile: 'a', toolContextRefs: ['wide'], format: 'anthropic' },
      query: 'fahrenheit',
    })) as SearchReply;
    expect(anthropic.tools.map((t) => t.name)).toEqual(['tool_7']);
    expect(anthropic.providerResult).toEqual([{ type: 'tool_reference', tool_name: 'tool_7' }]);
    const openai = (await reg.search({
      session: { profile: 'a', toolContextRefs: ['wide'], format: 'openai', strict: true },
      query: 'celsius temperature',
    })) as SearchReply;
    expect(openai.providerResult).toMatchObject({
      type: 'tool_search_output',
      execution: 'client',
      status: 'completed',
      tools: [{ type: 'function', function: { name: 'tool_7', strict: true } }],
    });
  });

  it('scores an index kept up by changes as one made fresh', async () => {
    const resolvedTools = async (spec: ToolContextSpec) =>
      (await registry(spec).resolve({ profile: 'a', toolContextRefs: ['wide'] })).matrixTools;
    const after = wide(12);
    after.matrixTools = [
      ...after
        .matrixTools!.slice(2)
        .map((t) => (t.name === 'tool_3' ? { ...t, description: 'Tool number 3, changed' } : t)),
      { ...after.matrixTools![0]!, name: 'thermometer_read', description: 'Read the temperature in Celsius' },
    ];
    const kept = new SessionIndex();
    expect(kept.sync(await resolvedTools(wide(12)), 'one')).toBe(12);
    kept.search('temperature', 5);
    // Two removed, one added, one changed (taken out and put back): 5 documents touched, not 12.
    expect(kept.sync(await resolvedTools(after), 'two')).toBe(5);
    const fresh = new SessionIndex();
    fresh.sync(await resolvedTools(after), 'two');
    for (const query of ['temperature celsius', 'tool wide', 'read thermometer', 'changed']) {
      expect(kept.search(query, 50)).toEqual(fresh.search(query, 50));
    }
    expect(kept.search('changed', 5).tools.map((t) => t.name)).toEqual(['tool_3']);
  });

  it('keeps session indexes within a bound of tools, the least recently searched out first', async () => {
    const reg = registry(wide(20, 'a'), wide(20, 'b'), wide(40, 'c'));
    const searches = new ToolSearch(45);
    const find = async (key: string) =>
      searches.find(key, await reg.resolve({ profile: 'x', toolContextRefs: [key] }), 'fahrenheit');
    await find('a');
    await find('b');
    expect([searches.sessions, searches.tools]).toEqual([2, 40]);
    await find('a');
    // c alone passes the bound: b (least recent), then a go; the index searched now stays.
    expect((await find('c')).tools.map((t) => t.name)).toEqual(['tool_7']);
    expect([searches.sessions, searches.tools]).toEqual([1, 40]);
  });

  it('gives the MCP bridge the kept tools and search_tools past the threshold, all of them below it', async () => {
    const mcp = async (n: number) =>
      (await registry(wide(n)).resolve({ profile: 'a', toolContextRefs: ['wide'], format: 'mcp' }))
        .providerTools as McpTool[];
    expect(mcpListedTools(await mcp(30)).map((t) => t.name)).toHaveLength(30);
    const past = mcpListedTools(await mcp(31), { keep: ['tool_9', 'tool_2'] });
    expect(past.map((t) => t.name)).toEqual(['tool_2', 'tool_9', 'search_tools']);
    expect(past[2]?.inputSchema).toMatchObject({ required: ['query'] });
  });
});
