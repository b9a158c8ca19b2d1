import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeBody, Encoding } from '../../src/bus/codec.js';
import type { Progress } from '../../src/bus/context.js';
import { parseServers } from '../../src/mcp/host/config.js';
import { llmNameOf, opOfTool } from '../../src/mcp/host/names.js';
import type { DefinitionEvent } from '../../src/mcp/host/pinning.js';
import { definitionEventSubject } from '../../src/mcp/host/server-host.js';
import { eventually } from '../harness/eventually.js';
import { fixtureServer, type HostWorld, startHostWorld } from '../harness/mcp-host.js';

/** `${env:NAME}` as the mcpServers file writes it. */
const envRef = (name: string): string => ['$', '{env:', name, '}'].join('');

/** What `$introspect` of a host mount says. */
interface HostIntrospect {
  state: string;
  restarts: number;
  lastError?: string;
  tools: Array<{ tool: string; name: string; op: string; digest: string; held?: boolean }>;
  held: Array<{ tool: string; change: string; before?: string; after: string }>;
  leftOut: Array<{ tool: string; reason: string }>;
}

const TOKEN = 'bearer-secret-for-tests';

/** A Streamable HTTP MCP server (stateless) that answers only `Authorization: Bearer <TOKEN>`. */
async function startHttpServer(): Promise<{ url: string; close(): Promise<void> }> {
  const http: HttpServer = createServer(async (req, res) => {
    if (req.headers.authorization !== `Bearer ${TOKEN}`) {
      res.writeHead(401, { 'WWW-Authenticate': 'Bearer' }).end();
      return;
    }
    const server = new Server({ name: 'remote', version: '2.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: [
        {
          name: 'whoami',
          description: 'Says who it is.',
          inputSchema: { type: 'object' },
          annotations: { readOnlyHint: true },
        },
      ],
    }));
    server.setRequestHandler(CallToolRequestSchema, () => ({ content: [{ type: 'text', text: 'remote server' }] }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => void transport.close());
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/mcp`, close: () => new Promise((resolve) => http.close(() => resolve())) };
}

describe('the MCP host supervises, pins and refuses', () => {
  let world: HostWorld;
  let remote: Awaited<ReturnType<typeof startHttpServer>>;
  const log: string[] = [];
  const fx = ['mcp.fx'];
  const introspect = (mount = 'mcp.fx') => world.client.request<HostIntrospect>(mount, '$introspect', {});

  beforeAll(async () => {
    remote = await startHttpServer();
    process.env.MCP_HOST_TEST_TOKEN = TOKEN;
    world = await startHostWorld(
      {
        fx: fixtureServer(),
        remote: { url: remote.url, headers: { Authorization: `Bearer ${envRef('MCP_HOST_TEST_TOKEN')}` } },
        noauth: { url: remote.url },
      },
      {
        timing: { initializeTimeoutMs: 15_000, firstBackoffMs: 200, maxBackoffMs: 1_000 },
        logger: {
          info: (m) => log.push(m),
          error: (m, f) => log.push(m + (process.env.MCP_HOST_DEBUG ? JSON.stringify(f) : '')),
        },
      },
    );
  }, 60_000);
  afterAll(async () => {
    if (process.env.MCP_HOST_DEBUG) console.log(log.join('\n'));
    await world?.stop();
    await remote?.close();
  });

  it('kills a server that never answers initialize and says so in $introspect', async () => {
    const [hangServer] = parseServers({ mcpServers: { hang: fixtureServer('hang') } });
    const host = await world.startHost(hangServer === undefined ? [] : [hangServer], {
      timing: { initializeTimeoutMs: 1_000, firstBackoffMs: 200, maxBackoffMs: 1_000 },
    });
    expect(host.servers[0]?.state).toBe('failed');
    const hang = await introspect('mcp.hang');
    expect(['failed', 'restarting']).toContain(hang.state);
    expect(hang.lastError).toMatch(/initialize/);
    expect(hang.tools).toEqual([]);
  });

  it('reaches a Streamable HTTP server with the bearer header read from the environment', async () => {
    const result = await world.call(['mcp.remote'], 'remote_whoami', {});
    expect(JSON.stringify(result.structured)).toContain('remote server');
    const noauth = await introspect('mcp.noauth');
    expect(noauth.state).toBe('failed');
  });

  it('encodes odd tool names losslessly and leaves out a tool whose schema does not compile', async () => {
    const odd = await world.call(fx, llmNameOf('fx_', 'odd.name/with space'), {});
    expect(JSON.stringify(odd.structured)).toContain('odd');
    const info = await introspect();
    expect(info.tools.find((t) => t.tool === 'odd.name/with space')?.op).toBe(opOfTool('odd.name/with space'));
    expect(info.leftOut.find((l) => l.tool === 'bad_schema')?.reason).toMatch(/compile|schema/i);
  });

  it("carries the server's isError into the ToolResult, and refuses its sampling request with an MCP error", async () => {
    const failed = await world.call(fx, 'fx_fail', {});
    expect(failed.isError).toBe(true);
    expect(failed.structured).toEqual({ content: [{ type: 'text', text: 'it failed' }], isError: true });
    expect((await world.call(fx, 'fx_greet', { name: 'z' })).isError).toBe(false);
    const sampling = await world.call(fx, 'fx_ask_sampling', {});
    expect(JSON.stringify(sampling.structured)).toMatch(/refused: .*not offered/);
  });

  it('tells the server of a cancel (notifications/cancelled): its tool stops', async () => {
    const callId = 'fx-cancel-1';
    const running = world.call(fx, 'fx_slow', { ms: 20_000 }, { callId });
    await new Promise((resolve) => setTimeout(resolve, 500));
    await world.client.request('system.dispatcher', '$cancel', { callId }, { principal: 'agent:test', session: 's1' });
    expect((await running).error?.code).toBe('cancelled');
    await eventually(() => expect(log.some((l) => l.includes('slow: cancelled'))).toBe(true));
  });

  it('survives a flood of progress: the call completes, the reports are thinned', async () => {
    const seen: Progress[] = [];
    const result = await world.call(fx, 'fx_flood', { n: 3000 }, { onProgress: (p) => seen.push(p) });
    expect(JSON.stringify(result.structured)).toContain('flooded 3000');
    expect(seen.length).toBeLessThan(3000);
  });

  it('answers a call in flight unavailable when its stdio server is killed, and the next one after the restart', async () => {
    const pid = Number(JSON.parse((await world.call(fx, 'fx_pid', {})).content).content[0].text);
    const running = world.call(fx, 'fx_slow', { ms: 20_000 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    process.kill(pid, 'SIGKILL');
    const result = await running;
    expect(result.error?.code).toBe('unavailable');
    const next = await eventually(async () => {
      const r = await world.call(fx, 'fx_greet', { name: 'again' });
      if (r.isError) throw new Error(r.content);
      return r;
    });
    expect(JSON.stringify(next.structured)).toContain('hello again');
    expect((await introspect()).restarts).toBeGreaterThan(0);
  });

  it('restarts a server that writes garbage on stdout', async () => {
    const before = (await introspect()).restarts;
    await world.call(fx, 'fx_spew', {});
    await eventually(async () => {
      const info = await introspect();
      expect(info.restarts).toBeGreaterThan(before);
      expect(info.state).toBe('ready');
    });
    expect(log.some((l) => l.includes('not JSON-RPC'))).toBe(true);
  });

  it('shares one name between two hosts: one stops, calls go on', async () => {
    const [fxServer] = parseServers({ mcpServers: { fx: fixtureServer() } });
    const second = await world.startHost(fxServer === undefined ? [] : [fxServer]);
    expect(second.servers[0]?.state).toBe('ready');
    const first = world.host.servers.find((s) => s.server.name === 'fx');
    await first?.stop();
    for (let i = 0; i < 5; i++) {
      const r = await world.call(fx, 'fx_greet', { name: `n${i}` });
      expect(JSON.stringify(r.structured)).toContain(`hello n${i}`);
    }
  });
  it('holds a changed description and a new tool until accept, drops a removed one at once, and says so', async () => {
    const events: DefinitionEvent[] = [];
    const sub = world.nc.subscribe(definitionEventSubject('fx'), {
      callback: (_err, msg) => {
        events.push(decodeBody(msg.data, Encoding.MsgPack) as DefinitionEvent);
      },
    });
    await world.call(fx, 'fx_rug_pull', {});
    const held = await eventually(async () => {
      const info = await introspect();
      expect(info.held.map((h) => h.tool).sort()).toEqual(['greet', 'newcomer']);
      return info.held;
    });
    const greet = held.find((h) => h.tool === 'greet');
    expect(greet?.change).toBe('changed');
    expect(greet?.before).not.toBe(greet?.after);
    expect(held.find((h) => h.tool === 'newcomer')).toMatchObject({ change: 'added' });
    const refused = await world.call(fx, 'fx_greet', { name: 'x' });
    expect(refused.error?.code).toBe('conflict');
    expect(refused.content).toMatch(/definition changed, waiting for acceptance/);
    const tools = async () =>
      (await world.registry.registry.resolve({ profile: 'test', toolContextRefs: fx })).matrixTools;
    await eventually(async () => expect((await tools()).map((t) => t.name)).not.toContain('fx_spew'));
    expect((await tools()).find((t) => t.name === 'fx_greet')?.description).toBe('Says hello to someone.');
    expect((await tools()).map((t) => t.name)).not.toContain('fx_newcomer');
    await eventually(() =>
      expect(events.map((e) => `${e.tool}:${e.change}`).sort()).toEqual([
        'greet:held',
        'newcomer:held',
        'spew:removed',
      ]),
    );
    expect(events.find((e) => e.tool === 'greet')).toMatchObject({ before: greet?.before, after: greet?.after });

    const accepted = await world.client.request<{ accepted: string[] }>(
      'mcp.fx',
      '$accept',
      {},
      { principal: 'user:ops' },
    );
    expect(accepted.accepted.sort()).toEqual(['greet', 'newcomer']);
    await eventually(async () => {
      const r = await world.call(fx, 'fx_greet', { name: 'y' });
      expect(r.isError).toBe(false);
    });
    expect((await tools()).find((t) => t.name === 'fx_greet')?.description).toMatch(/SSH keys/);
    expect((await tools()).map((t) => t.name)).toContain('fx_newcomer');
    await eventually(() =>
      expect(
        events
          .filter((e) => e.change === 'accepted')
          .map((e) => `${e.tool}:${e.by}`)
          .sort(),
      ).toEqual(['greet:user:ops', 'newcomer:user:ops']),
    );
    sub.unsubscribe();
  }, 60_000);
});
