/**
 * `matrix-tools mcp --http` under deploy/nats.conf: the bridge runs as the `agent` user, each
 * MCP session opened by the MCP SDK's Streamable HTTP client with its own bearer grant; without
 * a valid grant, with another session's grant, or under a foreign Host nothing is served. Without
 * trusted issuers it serves `--profile` to every client, as the stdio bridge does.
 */
import { request as httpRequest } from 'node:http';
import { experimental_createMCPClient as createMCPClient } from '@ai-sdk/mcp';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Progress } from '@modelcontextprotocol/sdk/types.js';
import { createAccount } from '@nats-io/nkeys';
import { generateText, stepCountIs } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { Mount } from '../../src/bus/mount.js';
import { type McpHttpBridge, startMcpHttp } from '../../src/mcp/http.js';
import { eventually } from '../harness/eventually.js';
import { type SecuredBus, startSecuredBus } from '../harness/identity.js';

/** A context whose tool reports progress (on a Mount at app.secret). */
const workContext = {
  key: 'http-work',
  title: 'Work',
  description: 'a tool that takes a while',
  matrixTools: [
    {
      name: 'secret_work',
      description: 'works in three steps',
      inputSchema: { type: 'object' },
      target: 'app.secret',
      op: '$work',
    },
  ],
  permissions: { approval: 'never' },
};

/** A POST of `initialize` with the headers given, as raw HTTP (fetch may not set Host). */
function rawInitialize(
  url: string,
  headers: Record<string, string>,
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const target = new URL(url);
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  });
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A POST in the session `sessionId`, under `grant`, of `body` as it is. */
function postInSession(url: string, grant: string, sessionId: string | undefined, body: string): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      Authorization: `Bearer ${grant}`,
      'mcp-session-id': sessionId ?? '',
      'mcp-protocol-version': '2025-06-18',
    },
    body,
  });
}

async function connectClient(
  url: string,
  grant?: string,
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: grant === undefined ? {} : { headers: { Authorization: `Bearer ${grant}` } },
  });
  const client = new Client({ name: 'http-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

describe('the MCP bridge over Streamable HTTP, where the service trusts issuers', () => {
  let bus: SecuredBus;
  let bridge: McpHttpBridge;
  const clients: Client[] = [];

  beforeAll(async () => {
    bus = await startSecuredBus();
    bridge = await startMcpHttp(await bus.connect('agent'), { port: 0, issuers: [bus.issuer.getPublicKey()] });
  }, 60_000);
  afterAll(async () => {
    await Promise.allSettled(clients.map((c) => c.close()));
    await bridge?.close();
    await bus?.stop();
  });

  const grantFor = (refs: string[], principal = 'agent:alpha') =>
    bus.grant({ principal, resolve: { profile: 'default', toolContextRefs: refs } });

  it('serves a client with a valid bearer grant its grant’s tools, and runs its calls', async () => {
    const { client } = await connectClient(bridge.url, grantFor(['spy-tools']));
    clients.push(client);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['spy_run']);
    const runs = bus.spy.count('$run');
    const result = await client.callTool({ name: 'spy_run', arguments: {} });
    expect(result).toMatchObject({ isError: false, content: [{ type: 'text', text: '{"ran":true}' }] });
    expect(bus.spy.count('$run')).toBe(runs + 1);
    expect(bus.spy.seen.at(-1)?.headers['Matrix-Principal']).toBe('agent:alpha');
  });

  it('gives each session its own grant’s tools', async () => {
    const { client } = await connectClient(bridge.url, grantFor(['actor-readonly'], 'agent:beta'));
    clients.push(client);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).not.toContain('spy_run');
    expect(bridge.sessions()).toBeGreaterThanOrEqual(2);
  });

  it('refuses a client without a bearer grant, or with one no trusted issuer signed: 401', async () => {
    await expect(connectClient(bridge.url)).rejects.toThrow();
    const missing = await rawInitialize(bridge.url, { Host: new URL(bridge.url).host });
    expect(missing.status).toBe(401);
    expect(missing.headers['www-authenticate']).toMatch(/^Bearer /);
    expect(missing.body).toContain('Authorization: Bearer');
    const forged = bus.grant({ resolve: { profile: 'default', toolContextRefs: ['spy-tools'] } }, createAccount());
    const refused = await rawInitialize(bridge.url, {
      Host: new URL(bridge.url).host,
      Authorization: `Bearer ${forged}`,
    });
    expect(refused.status).toBe(401);
    expect(refused.body).toMatch(/issuer/i);
  });

  it('refuses a request of a session under another grant than the one that opened it: 403', async () => {
    const { client, transport } = await connectClient(bridge.url, grantFor(['spy-tools']));
    clients.push(client);
    const other = grantFor(['spy-tools'], 'agent:mallory');
    const res = await postInSession(
      bridge.url,
      other,
      transport.sessionId,
      JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list', params: {} }),
    );
    expect(res.status).toBe(403);
  });

  it('lets a session go on under its grant signed again (same principal, session, authority): not 403', async () => {
    const spec = { resolve: { profile: 'default', toolContextRefs: ['spy-tools'] } };
    const { client, transport } = await connectClient(bridge.url, bus.grant({ ...spec, ttlSeconds: 600 }));
    clients.push(client);
    const renewed = bus.grant({ ...spec, ttlSeconds: 1200 });
    const list = JSON.stringify({ jsonrpc: '2.0', id: 21, method: 'tools/list', params: {} });
    const res = await postInSession(bridge.url, renewed, transport.sessionId, list);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('spy_run');
    // A grant of other authority is not a renewal.
    const wider = bus.grant({ resolve: { profile: 'default', toolContextRefs: ['spy-tools', 'actor-readonly'] } });
    expect((await postInSession(bridge.url, wider, transport.sessionId, list)).status).toBe(403);
  });

  it('answers 401 in a session once the service refused its grant (revoked), and closes it', async () => {
    const grant = grantFor(['spy-tools'], 'agent:revokee');
    const { client, transport } = await connectClient(bridge.url, grant);
    clients.push(client);
    expect(await client.callTool({ name: 'spy_run', arguments: {} })).toMatchObject({ isError: false });
    const operator = new BusClient(await bus.connect('operator'), { timeoutMs: 5_000 });
    try {
      await operator.request('system.tools', '$revoke', { sub: 'agent:revokee' });
    } finally {
      operator.close();
    }
    // The call that meets the refusal is answered in the session; the next request is 401.
    await eventually(async () =>
      expect(await client.callTool({ name: 'spy_run', arguments: {} })).toMatchObject({ isError: true }),
    );
    const list = JSON.stringify({ jsonrpc: '2.0', id: 31, method: 'tools/list', params: {} });
    const refused = await postInSession(bridge.url, grant, transport.sessionId, list);
    expect(refused.status).toBe(401);
    expect(await refused.text()).toMatch(/refused this MCP session's grant: forbidden: .*revoked/);
    expect((await postInSession(bridge.url, grant, transport.sessionId, list)).status).toBe(404);
  });

  it('holds at most maxSessionsPerGrant sessions of one grant (429 past it); another grant still opens one', async () => {
    const small = await startMcpHttp(await bus.connect('agent'), {
      port: 0,
      issuers: [bus.issuer.getPublicKey()],
      maxSessionsPerGrant: 2,
    });
    const host = new URL(small.url).host;
    try {
      const grant = grantFor(['spy-tools']);
      const statuses = [];
      for (let i = 0; i < 3; i++)
        statuses.push((await rawInitialize(small.url, { Host: host, Authorization: `Bearer ${grant}` })).status);
      expect(statuses).toEqual([200, 200, 429]);
      const other = grantFor(['spy-tools'], 'agent:beta');
      expect((await rawInitialize(small.url, { Host: host, Authorization: `Bearer ${other}` })).status).toBe(200);
      expect(small.sessions()).toBe(3);
    } finally {
      await small.close();
    }
  });

  it('closes a session when its grant expires; the client is then refused', async () => {
    const grant = bus.grant({
      principal: 'agent:brief',
      ttlSeconds: 2,
      resolve: { profile: 'default', toolContextRefs: ['spy-tools'] },
    });
    const before = bridge.sessions();
    const { client } = await connectClient(bridge.url, grant);
    clients.push(client);
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['spy_run']);
    expect(bridge.sessions()).toBe(before + 1);
    await eventually(() => expect(bridge.sessions()).toBe(before), { timeoutMs: 6_000 });
    await expect(client.listTools()).rejects.toThrow();
  });

  it('reads a new session’s body before resolving anything: a first POST that is not initialize costs no $resolve', async () => {
    const nc = await bus.connect('agent');
    const lone = await startMcpHttp(nc, { port: 0, issuers: [bus.issuer.getPublicKey()] });
    const target = new URL(lone.url);
    const headers = {
      Host: target.host,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      Authorization: `Bearer ${grantFor(['spy-tools'])}`,
    };
    try {
      const sent = nc.stats().outMsgs;
      const list = await fetch(lone.url, {
        method: 'POST',
        headers,
        body: JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'tools/list', params: {} }),
      });
      expect(list.status).toBe(400);
      expect(await list.json()).toMatchObject({ id: 4, error: { code: -32600 } });
      // A body announced and never sent: nothing is resolved while it is awaited.
      const slow = httpRequest({
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: 'POST',
        headers: { ...headers, 'Content-Length': '400' },
      });
      slow.on('error', () => {});
      let closed = false;
      slow.on('close', () => (closed = true));
      slow.write('{"jsonrpc":"2.0","id":1,');
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(nc.stats().outMsgs).toBe(sent);
      // Its socket is held no longer than the body's time (10 s).
      await eventually(() => expect(closed).toBe(true), { timeoutMs: 15_000 });
      expect(nc.stats().outMsgs).toBe(sent);
      expect((await rawInitialize(lone.url, { Authorization: headers.Authorization, Host: target.host })).status).toBe(
        200,
      );
      expect(nc.stats().outMsgs).toBeGreaterThan(sent);
    } finally {
      await lone.close();
    }
  });

  it('sends a task’s progress to the client that started it with a progressToken, on its session', async () => {
    // app.secret's raw target gives way to a Mount whose op reports progress, a step each 700 ms.
    bus.secret.stop();
    const worker = await new Mount(await bus.connect('secret'), {
      name: 'app.secret',
      version: '1.0.0',
      description: 'reports progress',
      ops: {
        $work: {
          description: 'works in three steps',
          request: { type: 'object' },
          response: { type: 'object' },
          handle: async (_req, ctx) => {
            for (const step of [1, 2, 3]) {
              await new Promise((resolve) => setTimeout(resolve, 700));
              ctx.progress(step, 3, `step ${step}`);
            }
            await new Promise((resolve) => setTimeout(resolve, 700));
            return { worked: true };
          },
        },
      },
    }).start();
    const operator = new BusClient(await bus.connect('operator'), { timeoutMs: 5_000 });
    try {
      await operator.request('system.tools', '$register', { spec: workContext });
      const { client } = await connectClient(bridge.url, grantFor(['http-work']));
      clients.push(client);
      const progress: Progress[] = [];
      const stream = client.experimental.tasks.callToolStream({ name: 'secret_work', arguments: {} }, undefined, {
        task: {},
        onprogress: (p) => progress.push(p),
      });
      let text = '';
      for await (const message of stream) {
        if (message.type === 'result') text = (message.result.content as Array<{ text: string }>)[0]?.text ?? '';
        if (message.type === 'error') throw message.error;
      }
      expect(text).toBe('{"worked":true}');
      expect(progress.length).toBeGreaterThan(0);
      expect(progress.every((p) => p.total === 3 && p.progress >= 1 && p.progress <= 3)).toBe(true);
    } finally {
      operator.close();
      await worker.stop();
    }
  });

  it('answers a malformed POST in a session as stdio answers the line: -32602 / -32600 with its id, 400', async () => {
    const grant = grantFor(['spy-tools']);
    const { client, transport } = await connectClient(bridge.url, grant);
    clients.push(client);
    const post = async (body: string) => {
      const res = await postInSession(bridge.url, grant, transport.sessionId, body);
      return {
        status: res.status,
        body: (await res.json()) as { id: unknown; error: { code: number; message: string } },
      };
    };
    expect(await post('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"spy_run"}')).toMatchObject({
      status: 400,
      body: { id: 7, error: { code: -32602, message: 'tools/call params must be an object, got string' } },
    });
    expect(await post('{"jsonrpc":"2.0","id":8,"method":"tools/list","params":5}')).toMatchObject({
      status: 400,
      body: { id: 8, error: { code: -32602 } },
    });
    expect(await post('{"id":9,"hello":"there"}')).toMatchObject({
      status: 400,
      body: { id: 9, error: { code: -32600 } },
    });
    // 2,000,000 levels of nesting: refused from the text, before anything parses it.
    const deep = await post(`${'['.repeat(2_000_000)}${']'.repeat(2_000_000)}`);
    expect(deep).toMatchObject({
      status: 400,
      body: { error: { code: -32600, message: expect.stringMatching(/deeper than 64/) } },
    });
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['spy_run']);
  });

  it('refuses a session whose grant names a context that does not exist: 400, the client’s fault', async () => {
    const unknown = await rawInitialize(bridge.url, {
      Host: new URL(bridge.url).host,
      Authorization: `Bearer ${grantFor(['no-such-context'])}`,
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toContain('no-such-context');
  });

  it('refuses a foreign Host or Origin (DNS rebinding): 403, before any grant is looked at', async () => {
    const grant = grantFor(['spy-tools']);
    const host = await rawInitialize(bridge.url, { Host: 'evil.example.com', Authorization: `Bearer ${grant}` });
    expect(host.status).toBe(403);
    expect(host.body).toContain('evil.example.com');
    const origin = await rawInitialize(bridge.url, {
      Host: new URL(bridge.url).host,
      Origin: 'http://evil.example.com',
      Authorization: `Bearer ${grant}`,
    });
    expect(origin.status).toBe(403);
    const local = await rawInitialize(bridge.url, {
      Host: `localhost:${new URL(bridge.url).port}`,
      Authorization: `Bearer ${grant}`,
    });
    expect(local.status).toBe(200);
  });
});

describe('the MCP bridge over Streamable HTTP, without trusted issuers (development)', () => {
  let bus: SecuredBus;
  let bridge: McpHttpBridge;

  beforeAll(async () => {
    bus = await startSecuredBus({ trust: false });
    bridge = await startMcpHttp(await bus.connect('agent'), {
      port: 0,
      session: { profile: 'default', toolContextRefs: ['spy-tools', 'actor-edit'] },
    });
  }, 60_000);
  afterAll(async () => {
    await bridge?.close();
    await bus?.stop();
  });

  it('tells the AI SDK’s MCP client a failure in the words it keeps (it drops isError)', async () => {
    const mcp = await createMCPClient({ transport: { type: 'http', url: bridge.url } });
    try {
      const model = new MockLanguageModelV4({
        doGenerate: async ({ prompt }) => ({
          content: prompt.some((m) => m.role === 'tool')
            ? [{ type: 'text', text: 'done' }]
            : [
                {
                  type: 'tool-call',
                  toolCallId: 'x1',
                  toolName: 'matrix_invoke',
                  input: '{"target":"app.secret","op":"$run","args":{}}',
                },
              ],
          finishReason: { unified: 'stop', raw: undefined },
          usage: {
            inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
            outputTokens: { total: 1, text: 1, reasoning: undefined },
          },
          warnings: [],
        }),
      });
      await generateText({ model, tools: await mcp.tools(), prompt: 'go', stopWhen: stepCountIs(2) });
      const told = model.doGenerateCalls[1]?.prompt
        .flatMap((m) => (m.role === 'tool' ? m.content : []))
        .find((part) => part.type === 'tool-result');
      expect(told?.output).toMatchObject({
        type: 'content',
        value: [{ type: 'text', text: expect.stringMatching(/^Error \(approval_denied\): /) }],
      });
    } finally {
      await mcp.close();
    }
  });

  it('refuses a session past its most open (503), and closes one whose client went away', async () => {
    const small = await startMcpHttp(await bus.connect('agent'), {
      port: 0,
      session: { profile: 'default', toolContextRefs: ['spy-tools'] },
      maxSessions: 1,
      idleMs: 300,
    });
    const host = { Host: new URL(small.url).host };
    try {
      // A client that initialized and left: no request since, none open.
      expect((await rawInitialize(small.url, host)).status).toBe(200);
      expect((await rawInitialize(small.url, host)).status).toBe(503);
      await eventually(() => expect(small.sessions()).toBe(0), { timeoutMs: 5_000 });
      // A client that stays (the SDK's holds a GET stream for list_changed) is not idle.
      const { client } = await connectClient(small.url);
      await new Promise((resolve) => setTimeout(resolve, 900));
      expect(small.sessions()).toBe(1);
      expect((await client.listTools()).tools.map((t) => t.name)).toContain('spy_run');
      await client.close();
    } finally {
      await small.close();
    }
  });

  it('listens on every address only with --allowed-host, and serves the names it gives', async () => {
    const session = { profile: 'default', toolContextRefs: ['spy-tools'] };
    await expect(startMcpHttp(await bus.connect('agent'), { host: '0.0.0.0', port: 0, session })).rejects.toThrow(
      /--allowed-host/,
    );
    const wide = await startMcpHttp(await bus.connect('agent'), {
      host: '0.0.0.0',
      port: 0,
      session,
      allowedHosts: ['bridge.example'],
    });
    try {
      const port = new URL(wide.url).port;
      expect((await rawInitialize(wide.url, { Host: `bridge.example:${port}` })).status).toBe(200);
      expect((await rawInitialize(wide.url, { Host: `other.example:${port}` })).status).toBe(403);
    } finally {
      await wide.close();
    }
  });

  it('refuses a client’s bearer grant (400): it checks none, and would serve the client as itself', async () => {
    const host = { Host: new URL(bridge.url).host };
    const refused = await rawInitialize(bridge.url, { ...host, Authorization: 'Bearer eyJhbGciOi.anything.x' });
    expect(refused.status).toBe(400);
    expect(refused.body).toContain('without --trust');
  });

  it('serves --profile to a client without a bearer, as over stdio', async () => {
    const { client } = await connectClient(bridge.url);
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toContain('spy_run');
      expect(await client.callTool({ name: 'spy_run', arguments: {} })).toMatchObject({ isError: false });
    } finally {
      await client.close();
    }
  });
});
