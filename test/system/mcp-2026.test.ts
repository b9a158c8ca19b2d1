/**
 * MCP 2025-11-25 and 2026-07-28 on one endpoint, and two bridge processes serving one 2026-07-28
 * client without affinity (PROTOCOL 15): the built CLI `matrix-tools mcp --http` twice, as the
 * `agent` user of deploy/nats.conf, in front of one service. The SDK 1.32 client speaks
 * 2025-11-25 and the SDK 2.x client, pinned, 2026-07-28; the task requests are raw HTTP, each one
 * to the other bridge, so nothing a bridge keeps can carry them.
 */
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport as ModernStdioTransport } from '@modelcontextprotocol/client/stdio';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createAccount } from '@nats-io/nkeys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { Mount } from '../../src/bus/mount.js';
import { type McpHttpBridge, startMcpHttp } from '../../src/mcp/http.js';
import { eventually } from '../harness/eventually.js';
import { type SecuredBus, startSecuredBus } from '../harness/identity.js';
import { agentEnv, CLI_MAIN, type HttpBridgeProcess, sleepUnlessAborted, startHttpBridge } from '../harness/mcp.js';

const REVISION = '2026-07-28';
const TASKS = 'io.modelcontextprotocol/tasks';
/** The fields of the tasks extension's `CreateTaskResult` (a `Task` with `resultType: "task"`). */
const CREATE_TASK_RESULT_KEYS = new Set([
  'taskId',
  'status',
  'statusMessage',
  'createdAt',
  'lastUpdatedAt',
  'ttlMs',
  'pollIntervalMs',
  'resultType',
  '_meta',
]);

/** Two tools on app.secret: `echo` never a task, `wait` a task whenever the client takes tasks. */
const tools = {
  key: 'rev2026',
  title: 'Revision 2026 tools',
  description: 'tools the two-revision tests call',
  matrixTools: [
    {
      name: 'echo',
      description: 'says back what it was given',
      inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
      target: 'app.secret',
      op: '$echo',
      resultMode: 'text',
      execution: { taskSupport: 'forbidden' },
    },
    {
      name: 'wait',
      description: 'waits `ms`, unless cancelled',
      inputSchema: { type: 'object', properties: { ms: { type: 'number' } } },
      target: 'app.secret',
      op: '$wait',
      resultMode: 'text',
      execution: { taskSupport: 'optional' },
    },
  ],
  permissions: { approval: 'never' },
};

/** `wait` again, behind an approval no one gives in these tests. */
const guarded = {
  key: 'rev2026-guarded',
  title: 'Guarded',
  description: 'a tool that waits for an approver',
  matrixTools: [{ ...tools.matrixTools[1], name: 'guarded_wait', description: 'waits, once approved' }],
  permissions: { approval: 'always' },
};

/** A JSON-RPC answer as the HTTP response carried it (a JSON body or the last event of a stream). */
interface Answer {
  status: number;
  result?: Record<string, unknown>;
  error?: { code: number; message: string };
}

let nextId = 1;

/**
 * One 2026-07-28 request, sent on its own: `_meta` names the revision and (unless `tasks` is
 * false) the tasks extension; `Mcp-Method` is the method unless `headers` says otherwise.
 */
async function request(
  url: string,
  method: string,
  params: Record<string, unknown> = {},
  options: { name?: string; headers?: Record<string, string>; tasks?: boolean } = {},
): Promise<Answer> {
  const capabilities = options.tasks === false ? {} : { extensions: { [TASKS]: {} } };
  const body = {
    jsonrpc: '2.0',
    id: nextId++,
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': REVISION,
        'io.modelcontextprotocol/clientCapabilities': capabilities,
      },
    },
  };
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': REVISION,
      'Mcp-Method': method,
      ...(options.name === undefined ? {} : { 'Mcp-Name': options.name }),
      ...options.headers,
    },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  const events = text.startsWith('{') ? [text] : [...text.matchAll(/^data: (.*)$/gm)].map((m) => m[1] as string);
  const messages = events.map((e) => JSON.parse(e) as { id?: number } & Answer);
  const answer: Partial<Answer> = messages.find((m) => m.id === body.id) ?? {};
  return { status: res.status, result: answer.result, error: answer.error };
}

describe('MCP 2025-11-25 and 2026-07-28 on one endpoint, two bridges without affinity', () => {
  let bus: SecuredBus;
  let a: HttpBridgeProcess;
  let b: HttpBridgeProcess;
  let mount: Mount | undefined;

  beforeAll(async () => {
    bus = await startSecuredBus({ trust: false });
    bus.secret.stop();
    mount = await new Mount(await bus.connect('secret'), {
      name: 'app.secret',
      version: '1.0.0',
      description: 'the two-revision fixtures',
      ops: {
        $echo: {
          description: 'says back `text`',
          request: { type: 'object' },
          response: { type: 'string' },
          handle: async (req) => `echo: ${String((req as { text?: unknown }).text)}`,
        },
        $wait: {
          description: 'waits `ms` unless cancelled',
          request: { type: 'object' },
          response: { type: 'string' },
          handle: async (req, ctx) => {
            const ms = Number((req as { ms?: unknown }).ms ?? 0);
            await sleepUnlessAborted(ms, ctx.signal);
            return `waited ${ms} ms`;
          },
        },
      },
    }).start();
    const operator = new BusClient(await bus.connect('operator'), { timeoutMs: 5_000 });
    await operator.request('system.tools', '$register', { spec: tools });
    await operator.request('system.tools', '$register', { spec: guarded });
    operator.close();
    const args = ['--profile', 'default', '--refs', 'rev2026,rev2026-guarded'];
    [a, b] = await Promise.all([startHttpBridge(bus.server.url, args), startHttpBridge(bus.server.url, args)]);
  }, 90_000);
  afterAll(async () => {
    a?.stop();
    b?.stop();
    await mount?.stop();
    await bus?.stop();
  });

  it('serves the SDK 1.32 client (2025-11-25) and the SDK 2.x client (2026-07-28) on one endpoint', async () => {
    const legacy = new Client({ name: 'legacy', version: '1.0.0' });
    await legacy.connect(new StreamableHTTPClientTransport(new URL(a.url)));
    const modern = new ModernClient(
      { name: 'modern', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: REVISION } } },
    );
    await modern.connect(new ModernTransport(new URL(a.url)));
    try {
      expect(legacy.getServerVersion()?.name).toBe('matrix-tools');
      expect(modern.getNegotiatedProtocolVersion()).toBe(REVISION);
      const listed = [await legacy.listTools(), await modern.listTools()];
      for (const list of listed) expect(list.tools.map((t) => t.name).sort()).toEqual(['echo', 'guarded_wait', 'wait']);
      // 2026 tools carry no execution: the server decides which calls become tasks.
      expect(listed[1]?.tools.every((t) => !('execution' in t))).toBe(true);
      const called = [
        await legacy.callTool({ name: 'echo', arguments: { text: 'from 2025' } }),
        await modern.callTool({ name: 'echo', arguments: { text: 'from 2026' } }),
      ];
      expect(called.map((r) => (r.content as { text: string }[])[0]?.text)).toEqual([
        'echo: from 2025',
        'echo: from 2026',
      ]);
    } finally {
      await legacy.close();
      await modern.close();
    }
  }, 60_000);

  it('serves either revision on stdio, as the first message of the client asks', async () => {
    const server = {
      command: process.execPath,
      args: [CLI_MAIN, 'mcp', '--profile', 'default', '--refs', 'rev2026,rev2026-guarded'],
      env: { ...(process.env as Record<string, string>), ...agentEnv(bus.server.url) },
    };
    const legacy = new Client({ name: 'legacy', version: '1.0.0' });
    await legacy.connect(new StdioClientTransport(server));
    const modern = new ModernClient(
      { name: 'modern', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: REVISION } } },
    );
    await modern.connect(new ModernStdioTransport(server));
    try {
      expect(modern.getNegotiatedProtocolVersion()).toBe(REVISION);
      const called = [
        await legacy.callTool({ name: 'echo', arguments: { text: 'stdio 2025' } }),
        await modern.callTool({ name: 'echo', arguments: { text: 'stdio 2026' } }),
      ];
      expect(called.map((r) => (r.content as { text: string }[])[0]?.text)).toEqual([
        'echo: stdio 2025',
        'echo: stdio 2026',
      ]);
    } finally {
      await legacy.close();
      await modern.close();
    }
  }, 60_000);

  it('tells a 2026 client listening on either bridge, or on stdio, when its tools change', async () => {
    const stdio = {
      command: process.execPath,
      args: [CLI_MAIN, 'mcp', '--profile', 'default', '--refs', 'rev2026,rev2026-guarded'],
      env: { ...(process.env as Record<string, string>), ...agentEnv(bus.server.url) },
    };
    const transports = [
      new ModernTransport(new URL(a.url)),
      new ModernTransport(new URL(b.url)),
      new ModernStdioTransport(stdio),
    ];
    const heard = transports.map(() => 0);
    const clients = await Promise.all(
      transports.map(async (transport, i) => {
        const client = new ModernClient(
          { name: `listener-${i}`, version: '1.0.0' },
          { versionNegotiation: { mode: { pin: REVISION } } },
        );
        client.setNotificationHandler('notifications/tools/list_changed', () => {
          heard[i] = (heard[i] ?? 0) + 1;
        });
        await client.connect(transport);
        return client;
      }),
    );
    const operator = new BusClient(await bus.connect('operator'), { timeoutMs: 5_000 });
    try {
      for (const client of clients)
        expect((await client.listen({ toolsListChanged: true })).honoredFilter).toEqual({ toolsListChanged: true });
      // The same tools by name (the other tests list them), another description: another digest.
      const reworded = {
        ...guarded,
        matrixTools: [{ ...guarded.matrixTools[0], description: 'waits, once an approver says so' }],
      };
      await operator.request('system.tools', '$register', { spec: reworded });
      await eventually(() => heard.every((n) => n === 1), { timeoutMs: 20_000 });
    } finally {
      operator.close();
      await Promise.allSettled(clients.map((c) => c.close()));
    }
  }, 60_000);

  it('lists the same tools on either bridge, with cache hints and the registry revision', async () => {
    const lists = [await request(a.url, 'tools/list'), await request(b.url, 'tools/list')];
    for (const list of lists) {
      expect(list.status).toBe(200);
      expect(list.result).toMatchObject({ resultType: 'complete', cacheScope: 'private' });
      expect(Number.isInteger(list.result?.ttlMs)).toBe(true);
    }
    const meta = lists.map((l) => l.result?._meta as Record<string, unknown>);
    expect(meta[0]?.['dev.matrix-tools/registryRevision']).toBeTypeOf('number');
    expect(meta[0]?.['dev.matrix-tools/toolsDigest']).toBe(meta[1]?.['dev.matrix-tools/toolsDigest']);
  }, 30_000);

  it('makes a task through one bridge that the other reads, cancels and finishes', async () => {
    // Made on a, cancelled on b, seen cancelled on a.
    const long = await request(a.url, 'tools/call', { name: 'wait', arguments: { ms: 60_000 } }, { name: 'wait' });
    expect(long.result).toMatchObject({ resultType: 'task', status: 'working' });
    // The extension's CreateTaskResult and nothing else: no CallToolResult `content` on it.
    expect(Object.keys(long.result ?? {}).filter((k) => !CREATE_TASK_RESULT_KEYS.has(k))).toEqual([]);
    const taskId = String(long.result?.taskId);
    const seen = await request(b.url, 'tasks/get', { taskId }, { name: taskId });
    expect(seen.result).toMatchObject({ resultType: 'complete', taskId, status: 'working' });
    expect(seen.result).not.toHaveProperty('result');
    const cancelled = await request(b.url, 'tasks/cancel', { taskId }, { name: taskId });
    expect(cancelled.result).toMatchObject({ resultType: 'complete' });
    expect(cancelled.result).not.toHaveProperty('taskId');
    const after = await request(a.url, 'tasks/get', { taskId }, { name: taskId });
    expect(after.result).toMatchObject({ taskId, status: 'cancelled' });

    // Made on b, its result read inline on a once it ended, polling each bridge in turn.
    const short = await request(b.url, 'tools/call', { name: 'wait', arguments: { ms: 300 } }, { name: 'wait' });
    const shortId = String(short.result?.taskId);
    let turn = 0;
    const done = await eventually(
      async () => {
        const url = turn++ % 2 === 0 ? a.url : b.url;
        const got = await request(url, 'tasks/get', { taskId: shortId }, { name: shortId });
        return got.result?.status === 'completed' ? got.result : false;
      },
      { timeoutMs: 20_000 },
    );
    expect(done.result).toMatchObject({ content: [{ type: 'text', text: 'waited 300 ms' }] });
    expect(turn).toBeGreaterThan(0);
  }, 60_000);

  it('shows a task waiting for its approval as working, naming the approval', async () => {
    const made = await request(
      a.url,
      'tools/call',
      { name: 'guarded_wait', arguments: { ms: 10 } },
      { name: 'guarded_wait' },
    );
    expect(made.result).toMatchObject({ resultType: 'task' });
    const taskId = String(made.result?.taskId);
    const pending = await eventually(
      async () => {
        const got = await request(b.url, 'tasks/get', { taskId }, { name: taskId });
        return /approval/i.test(String(got.result?.statusMessage ?? '')) ? got.result : false;
      },
      { timeoutMs: 10_000 },
    );
    expect(pending).toMatchObject({ status: 'working' });
    expect(pending).not.toHaveProperty('inputRequests');
    await request(b.url, 'tasks/cancel', { taskId }, { name: taskId });
  }, 30_000);

  it('runs a call plainly for a 2026 client without the tasks extension', async () => {
    const plain = await request(
      b.url,
      'tools/call',
      { name: 'wait', arguments: { ms: 10 } },
      { name: 'wait', tasks: false },
    );
    expect(plain.result).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: 'waited 10 ms' }] });
    const refused = await request(b.url, 'tasks/get', { taskId: 'x' }, { name: 'x', tasks: false });
    expect(refused.error?.code).toBe(-32021);
  }, 30_000);

  it('refuses a request whose Mcp-Method disagrees with its body, and the methods 2026 removed', async () => {
    const mismatch = await request(a.url, 'tools/list', {}, { headers: { 'Mcp-Method': 'tools/call' } });
    expect(mismatch.status).toBe(400);
    expect(mismatch.error?.code).toBe(-32020);
    const noName = await request(a.url, 'tools/call', { name: 'echo', arguments: {} });
    expect(noName.status).toBe(400);
    expect(noName.error?.code).toBe(-32020);
    for (const method of ['tasks/result', 'tasks/list']) {
      const gone = await request(a.url, method, { taskId: 'x' }, { name: 'x' });
      expect(gone.error?.code, method).toBe(-32601);
    }
    const unknown = await request(b.url, 'tasks/get', { taskId: 'no-such-task' }, { name: 'no-such-task' });
    expect(unknown.error?.code).toBe(-32602);
  }, 30_000);
});

describe('MCP 2026-07-28 where the bridge trusts issuers: each request brings its grant', () => {
  let bus: SecuredBus;
  let bridge: McpHttpBridge;

  beforeAll(async () => {
    bus = await startSecuredBus();
    bridge = await startMcpHttp(await bus.connect('agent'), { port: 0, issuers: [bus.issuer.getPublicKey()] });
  }, 60_000);
  afterAll(async () => {
    await bridge?.close();
    await bus?.stop();
  });

  it('serves each request as its grant says, with no session', async () => {
    const grant = bus.grant({
      principal: 'agent:alpha',
      resolve: { profile: 'default', toolContextRefs: ['spy-tools'] },
    });
    const auth = { headers: { Authorization: `Bearer ${grant}` } };
    const listed = await request(bridge.url, 'tools/list', {}, auth);
    expect(((listed.result?.tools ?? []) as { name: string }[]).map((t) => t.name)).toEqual(['spy_run']);
    const called = await request(
      bridge.url,
      'tools/call',
      { name: 'spy_run', arguments: {} },
      { ...auth, name: 'spy_run', tasks: false },
    );
    expect(called.result).toMatchObject({ isError: false, content: [{ type: 'text', text: '{"ran":true}' }] });
    expect(bus.spy.seen.at(-1)?.headers['Matrix-Principal']).toBe('agent:alpha');
    expect(bridge.sessions()).toBe(0);
  }, 30_000);

  it('refuses a request without a grant, or with one no trusted issuer signed, with 401', async () => {
    const without = await request(bridge.url, 'tools/list');
    expect(without.status).toBe(401);
    const forged = bus.grant({ resolve: { profile: 'default', toolContextRefs: ['spy-tools'] } }, createAccount());
    const refused = await request(bridge.url, 'tools/list', {}, { headers: { Authorization: `Bearer ${forged}` } });
    expect(refused.status).toBe(401);
  }, 30_000);
});
