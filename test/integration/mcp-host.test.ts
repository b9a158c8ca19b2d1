import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client as ModernClient } from '@modelcontextprotocol/client';
import { StdioClientTransport as ModernStdioTransport } from '@modelcontextprotocol/client/stdio';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Progress } from '../../src/bus/context.js';
import { llmNameOf } from '../../src/mcp/host/names.js';
import { sharedNatsEnv, sharedNatsUrl } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { CLI_MAIN } from '../harness/mcp.js';
import { type HostWorld, referenceServer, scratchDir, startHostWorld } from '../harness/mcp-host.js';

/** The tools a server lists itself, through the SDK's client. */
async function ownTools(entry: { command: string; args: string[] }): Promise<string[]> {
  const client = new Client({ name: 'test', version: '1' });
  await client.connect(new StdioClientTransport({ ...entry, stderr: 'ignore' }));
  const { tools } = await client.listTools();
  await client.close();
  return tools.map((t) => t.name);
}

/** The structured reply of a host tool: MCP's CallToolResult. */
interface McpReply {
  content: Array<{ type: string; text?: string; data?: string; mimeType?: string }>;
  structuredContent?: Record<string, unknown>;
  isError: boolean;
}

describe('MCP servers as mounts, called through system.dispatcher', () => {
  let world: HostWorld;
  const dir = scratchDir();
  const servers = {
    everything: referenceServer('everything', ['stdio']),
    memory: referenceServer('memory', [], { env: { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') } }),
    fs: referenceServer('filesystem', [dir]),
  };

  beforeAll(async () => {
    // A variable of the host that no stdio server may see.
    process.env.MCP_HOST_PROBE_SECRET = 'host-only';
    world = await startHostWorld(
      servers,
      process.env.MCP_HOST_DEBUG
        ? { logger: { info: (m) => console.log(m), error: (m, f) => console.log('ERR', m, f) } }
        : {},
    );
  }, 60_000);
  afterAll(async () => {
    await world?.stop();
  });

  it("registers each server's own tools/list, prefixed, as the context mcp.<name>", async () => {
    for (const [name, entry] of Object.entries(servers)) {
      const own = await ownTools(entry);
      const listed = world.registry.registry.list({ keys: [`mcp.${name}`] });
      const context = (await listed).contexts[0];
      expect(context?.key).toBe(`mcp.${name}`);
      expect([...(context?.tools ?? [])].sort()).toEqual(own.map((t) => llmNameOf(`${name}_`, t)).sort());
    }
    expect(world.host.servers.map((s) => s.state)).toEqual(['ready', 'ready', 'ready']);
  });

  it("calls everything's echo and get-sum and gets MCP's content back", async () => {
    const echo = await world.call(['mcp.everything'], 'everything_echo', { message: 'over the bus' });
    expect(echo.isError).toBe(false);
    const reply = echo.structured as McpReply;
    expect(reply.isError).toBe(false);
    expect(reply.content[0]?.text).toContain('over the bus');
    const sum = await world.call(['mcp.everything'], 'everything_get-sum', { a: 2, b: 40 });
    expect((sum.structured as McpReply).content[0]?.text).toContain('42');
  });

  it("gives a stdio server PATH, HOME, LANG, TMPDIR and its own env, not the host's environment", async () => {
    const env = await world.call(['mcp.everything'], 'everything_get-env', {});
    const text = (env.structured as McpReply).content[0]?.text ?? '';
    expect(text).toContain('"PATH"');
    expect(text).not.toContain('MCP_HOST_PROBE_SECRET');
    expect(text).not.toContain('host-only');
  });

  it('brings images and structured content back as the server gave them', async () => {
    const image = await world.call(['mcp.everything'], 'everything_get-tiny-image', {});
    const blocks = (image.structured as McpReply).content;
    expect(blocks.some((b) => b.type === 'image' && b.mimeType === 'image/png' && (b.data?.length ?? 0) > 100)).toBe(
      true,
    );
    const structured = await world.call(['mcp.everything'], 'everything_get-structured-content', {
      location: 'New York',
    });
    expect((structured.structured as McpReply).structuredContent).toBeDefined();
  });

  it("keeps a tool's outputSchema in its projection and MCP's format, out of OpenAI's and Anthropic's", async () => {
    const resolve = (format: 'mcp' | 'openai' | 'anthropic') =>
      world.registry.registry.resolve({ profile: 'test', toolContextRefs: ['mcp.everything'], format });
    const name = 'everything_get-structured-content';
    const mcp = await resolve('mcp');
    const projected = mcp.matrixTools.find((t) => t.name === name)?.outputSchema;
    expect(projected?.type).toBe('object');
    expect(JSON.stringify(projected)).toContain('temperature');
    expect(mcp.matrixTools.find((t) => t.name === 'everything_echo')?.outputSchema).toBeUndefined();
    const listed = (mcp.providerTools as Array<{ name: string; outputSchema?: unknown }>).find((t) => t.name === name);
    expect(listed?.outputSchema).toEqual(projected);
    for (const format of ['openai', 'anthropic'] as const)
      expect(JSON.stringify((await resolve(format)).providerTools)).not.toContain('outputSchema');
  });

  it("gives an MCP client of the bridge the server's own structuredContent, checked against its outputSchema", async () => {
    const entry = servers.everything;
    const args = { location: 'Chicago' };
    const direct = new Client({ name: 'direct', version: '1' });
    await direct.connect(new StdioClientTransport({ ...entry, stderr: 'ignore' }));
    const own = await direct.callTool({ name: 'get-structured-content', arguments: args });
    await direct.close();
    expect(own.structuredContent).toMatchObject({ temperature: 36 });

    // The bridge as an MCP client runs it, in each revision it serves on stdio: the SDK 1.32
    // client (2025-11-25) and the SDK 2.x client pinned to 2026-07-28. Each checks
    // structuredContent against the listed outputSchema and throws on a mismatch (the whole
    // CallToolResult there would be one).
    const bridge = {
      command: process.execPath,
      args: [CLI_MAIN, 'mcp', '--profile', 'test', '--refs', 'mcp.everything'],
      env: { ...process.env, ...sharedNatsEnv(sharedNatsUrl()), NATS_URL: sharedNatsUrl() } as Record<string, string>,
      stderr: 'ignore' as const,
    };
    const legacy = new Client({ name: 'via-bridge', version: '1' });
    await legacy.connect(new StdioClientTransport(bridge));
    const modern = new ModernClient(
      { name: 'via-bridge-2026', version: '1' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await modern.connect(new ModernStdioTransport(bridge));
    try {
      expect(modern.getNegotiatedProtocolVersion()).toBe('2026-07-28');
      for (const bridged of [legacy, modern] as const) {
        const { tools } = await bridged.listTools();
        const listed = tools.find((t) => t.name === 'everything_get-structured-content');
        expect(listed?.outputSchema?.properties).toHaveProperty('temperature');
        expect(tools.find((t) => t.name === 'everything_echo')?.outputSchema).toBeUndefined();
        const got = await bridged.callTool({ name: 'everything_get-structured-content', arguments: args });
        expect(got.isError).toBe(false);
        expect(got.structuredContent).toEqual(own.structuredContent);
        expect(got.content).toEqual(own.content);
        // A tool without one keeps the bridge's usual result: its whole reply as text and structure.
        const echo = await bridged.callTool({ name: 'everything_echo', arguments: { message: 'hi' } });
        expect((echo.structuredContent as McpReply | undefined)?.content?.[0]?.text).toContain('hi');
      }
    } finally {
      await legacy.close();
      await modern.close();
    }
  }, 60_000);

  it('relays the long-running tool progress to a $call that asked, and stops it upstream on cancel', async () => {
    const seen: Progress[] = [];
    const done = await world.call(
      ['mcp.everything'],
      'everything_trigger-long-running-operation',
      { duration: 1, steps: 3 },
      { onProgress: (p) => seen.push(p) },
    );
    expect(done.isError).toBe(false);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.at(-1)?.total).toBe(3);

    const callId = 'mcp-cancel-1';
    const running = world.call(
      ['mcp.everything'],
      'everything_trigger-long-running-operation',
      { duration: 30, steps: 30 },
      { callId, onProgress: () => undefined },
    );
    await new Promise((resolve) => setTimeout(resolve, 1500));
    // Only the call's own caller cancels it: the same principal and session.
    const cancel = await world.client.request(
      'system.dispatcher',
      '$cancel',
      { callId },
      { principal: 'agent:test', session: 's1' },
    );
    expect(cancel).toEqual({ cancelled: true });
    expect((await running).error?.code).toBe('cancelled');
  });

  it("round-trips memory's create_entities then read_graph (explicitly non-destructive: not gated)", async () => {
    const created = await world.call(['mcp.memory'], 'memory_create_entities', {
      entities: [{ name: 'bus', entityType: 'thing', observations: ['carries tools'] }],
    });
    expect(created.isError).toBe(false);
    expect((created.structured as McpReply).isError).toBe(false);
    const graph = await world.call(['mcp.memory'], 'memory_read_graph', {});
    expect(JSON.stringify(graph.structured)).toContain('carries tools');
  });

  it('holds a filesystem write for approval and runs it once after approve', async () => {
    const target = join(dir, 'note.txt');
    const write = world.call(['mcp.fs'], 'fs_write_file', { path: target, content: 'written once' });
    const pending = await eventually(async () => {
      const found = (await world.person.pending()).approvals.find((a) => a.tool === 'fs_write_file');
      if (found === undefined) throw new Error('not pending yet');
      return found;
    });
    expect(() => readFileSync(target)).toThrow();
    await world.person.answer({ approvalId: pending.approvalId, decision: 'approve' }, { principal: 'user:ops' });
    const result = await write;
    expect(result.isError).toBe(false);
    expect(readFileSync(target, 'utf8')).toBe('written once');
    const read = await world.call(['mcp.fs'], 'fs_read_text_file', { path: target });
    expect(JSON.stringify(read.structured)).toContain('written once');
    // A read-only tool is not gated: nothing was pending for it.
    expect((await world.person.pending()).approvals.filter((a) => a.tool === 'fs_read_text_file')).toEqual([]);
  });
});
