import { spawn } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallEvent } from '../../src/audit/events.js';
import { watchCalls } from '../../src/audit/log.js';
import { BusClient } from '../../src/bus/client.js';
import type { Mount } from '../../src/bus/mount.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import { agentsMount } from '../../src/reference-mounts/agents.js';
import { sharedNatsEnv, sharedNatsUrl, testConnection } from '../harness/bus.js';
import { tracked } from '../harness/children.js';
import { eventually } from '../harness/eventually.js';
import { alive, CLI_MAIN, initializeParams, type RawBridge, startRawBridge } from '../harness/mcp.js';
import { contextSpec, type Instance, startInstance, uniqueBucket } from '../harness/registry.js';

/**
 * How long to wait for a bridge to exit once its client is gone. It takes well under a second;
 * the bound only tells "exited" from "left running", on a machine however busy.
 */
const EXIT_BOUND_MS = 15_000;

describe('the MCP bridge (matrix-tools mcp) over real stdio', () => {
  let url: string;
  let nc: NatsConnection;
  let client: BusClient;
  let registry: Instance;
  let agents: Mount;
  let dispatcher: Mount;
  const started: RawBridge[] = [];
  const clients: Client[] = [];

  beforeAll(async () => {
    url = sharedNatsUrl();
    nc = await testConnection();
    client = new BusClient(nc, { timeoutMs: 5_000 });
    registry = await startInstance(nc, uniqueBucket());
    agents = await agentsMount(nc).start();
    dispatcher = await dispatcherMount(nc).start();
  });
  afterAll(async () => {
    for (const b of started) if (b.child.exitCode === null) b.child.kill('SIGKILL');
    await Promise.all(clients.map((c) => c.close())); // a test that failed half-way leaves no bridge behind
    client.close();
    await agents.stop();
    await dispatcher.stop();
    await registry.stop();
  });

  const bridge = async (...args: string[]) => {
    const b = await startRawBridge(url, args);
    started.push(b);
    return b;
  };

  const sdkClient = (args: string[]) => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [CLI_MAIN, 'mcp', ...args],
      env: { ...process.env, ...sharedNatsEnv(url), NATS_URL: url } as Record<string, string>,
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const mcp = new Client({ name: 'sdk-test', version: '1.0.0' });
    clients.push(mcp);
    return { transport, mcp, stderr: () => stderr };
  };

  it('sends the resolved context instructions in initialize', async () => {
    const b = await bridge('--profile', 'default');
    const init = await b.request(1, 'initialize', initializeParams);
    expect(init.result?.instructions).toContain('## Actor inspection');
    expect(init.result?.instructions).toContain('matrix_introspect');
  });

  it('answers malformed tools/call params with -32602 Invalid params and a readable message', async () => {
    const b = await bridge('--profile', 'default');
    await b.request(1, 'initialize', initializeParams);
    b.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const cases: Array<[unknown, RegExp]> = [
      [
        { name: 'matrix_introspect', arguments: null },
        /params\.arguments of "matrix_introspect" must be an object \(or left out\), got null/,
      ],
      [
        { name: 'matrix_introspect', arguments: '{"mount":"x"}' },
        /params\.arguments of "matrix_introspect" must be an object .*got a string/,
      ],
      [{ arguments: {} }, /params\.name must name a tool \(a non-empty string\), got nothing/],
    ];
    let id = 10;
    for (const [params, message] of cases) {
      const reply = await b.request(++id, 'tools/call', params);
      expect(reply.error?.code).toBe(-32602);
      expect(reply.error?.message).toMatch(message);
      expect(reply.error?.message).not.toMatch(/invalid_type|"path"|\[\s*\{/); // no zod dump
    }
    // Lines the SDK's transport would drop unanswered.
    b.send({ jsonrpc: '2.0', id: ++id, method: 'tools/call', params: 'matrix_introspect' });
    const stringParams = await eventually(() => b.received.find((m) => m.id === id) ?? false);
    expect(stringParams.error).toEqual({ code: -32602, message: 'tools/call params must be an object, got string' });
    b.send('{"jsonrpc": "2.0", "id": 99, "method": "tools/li');
    const unparsable = await eventually(() => b.received.find((m) => m.id === null) ?? false);
    expect(unparsable.error?.code).toBe(-32700);
    // The bridge still serves well-formed calls after them.
    const ok = await b.request(++id, 'tools/call', { name: 'matrix_introspect', arguments: {} });
    expect(ok.result?.isError).toBe(false);
  });

  it('exits when stdin ends, answering what it already took, and leaves no process', async () => {
    const b = await bridge('--profile', 'default');
    b.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: initializeParams });
    b.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    b.send({
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'matrix_introspect', arguments: { mount: 'system.tools' } },
    });
    b.child.stdin.end();
    const exit = await Promise.race([
      b.exited,
      new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), EXIT_BOUND_MS)),
    ]);
    expect(exit).toEqual({ code: 0, signal: null });
    expect(alive(b.child.pid as number)).toBe(false);
    expect(b.received.find((m) => m.id === 2)?.result?.isError).toBe(false);
    expect(b.stderr()).toContain('stdin ended; closing');
  });

  it('exits when its client process dies, instead of living on as an orphan', async () => {
    // A client that starts the bridge with pipes, says its pid, and is then killed outright.
    const script = `const c = require('node:child_process').spawn(process.execPath, ${JSON.stringify([CLI_MAIN, 'mcp', '--profile', 'default'])}, { stdio: ['pipe', 'pipe', 'inherit'] });
      c.stdout.on('data', () => {}); console.log(c.pid); setInterval(() => {}, 1000);`;
    const parent = tracked(
      spawn(process.execPath, ['-e', script], {
        env: { ...process.env, ...sharedNatsEnv(url), NATS_URL: url },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    let out = '';
    let err = '';
    parent.stdout.on('data', (d: Buffer) => (out += d.toString()));
    parent.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const pid = Number(await eventually(() => /^\d+/.exec(out)?.[0] ?? false));
    await eventually(() => /mcp bridge:? ready/.test(err));
    parent.kill('SIGKILL');
    try {
      await eventually(() => expect(alive(pid)).toBe(false), { timeoutMs: EXIT_BOUND_MS });
    } finally {
      if (alive(pid)) process.kill(pid, 'SIGKILL');
    }
  });

  it('ends by itself when the MCP SDK client closes', async () => {
    const { transport, mcp, stderr } = sdkClient(['--profile', 'default']);
    await mcp.connect(transport);
    const pid = transport.pid as number;
    expect((await mcp.listTools()).tools.map((t) => t.name)).toEqual(['matrix_introspect', 'session_state_read']);
    await mcp.close();
    await eventually(() => expect(alive(pid)).toBe(false), { timeoutMs: EXIT_BOUND_MS });
    expect(stderr()).toContain('stdin ended; closing'); // not the SDK's SIGTERM, two seconds later
  });

  it("sends list_changed only when this profile's resolved tools change", async () => {
    const key = `mcp-watched-${process.pid}`;
    await client.request('system.tools', '$register', { spec: contextSpec(key) });
    const { transport, mcp, stderr } = sdkClient(['--profile', 'default', '--refs', `actor-readonly,${key}`]);
    let changed = 0;
    mcp.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      changed++;
    });
    await mcp.connect(transport);
    expect((await mcp.listTools()).tools.map((t) => t.name)).toContain(`${key.replaceAll('-', '_')}_tool`);

    // A context this profile does not use: the bridge checks, finds its tools unchanged, says nothing.
    await client.request('system.tools', '$register', { spec: contextSpec(`mcp-unrelated-${process.pid}`) });
    await eventually(() => expect(stderr()).toMatch(/tools unchanged/));
    await mcp.ping(); // anything sent before the check's log line is read by now
    expect(changed).toBe(0);

    // A change to a context it uses: one notification.
    const extra = {
      name: 'mcp_added_tool',
      description: 'added',
      inputSchema: { type: 'object' as const },
      target: 'app.things',
      op: '$do',
    };
    const updated = contextSpec(key);
    updated.matrixTools = [...(updated.matrixTools ?? []), extra];
    await client.request('system.tools', '$register', { spec: updated });
    await eventually(() => expect(changed).toBe(1));
    expect((await mcp.listTools()).tools.map((t) => t.name)).toContain('mcp_added_tool');
    await mcp.close();
    await client.request('system.tools', '$unregister', { key });
    await client.request('system.tools', '$unregister', { key: `mcp-unrelated-${process.pid}` });
  });

  it('audits MCP calls under a callId unique to each bridge session, the JSON-RPC id kept in it', async () => {
    const events: CallEvent[] = [];
    const stop = watchCalls(nc, (e) => events.push(e));
    await nc.flush();
    const callIds: string[] = [];
    for (let session = 0; session < 2; session++) {
      const { transport, mcp } = sdkClient(['--profile', 'default']);
      await mcp.connect(transport);
      // The same request sequence in each session: the same JSON-RPC id for the call.
      const called = await mcp.callTool({ name: 'matrix_introspect', arguments: {} });
      expect(called.isError).toBe(false);
      await mcp.close();
      const event = await eventually(
        () => events.find((e) => e.name === 'matrix_introspect' && !callIds.includes(e.callId)) ?? false,
      );
      callIds.push(event.callId);
    }
    stop();
    expect(callIds[0]).not.toBe(callIds[1]);
    const [first, second] = callIds.map((id) => /^mcp-([0-9a-f]{12})-(\d+)$/.exec(id));
    expect(first?.[2]).toBeDefined();
    expect(first?.[2]).toBe(second?.[2]);
    expect(first?.[1]).not.toBe(second?.[1]);
  });
});
