import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallEvent } from '../../src/audit/events.js';
import { watchCalls } from '../../src/audit/log.js';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import { eventually } from '../harness/eventually.js';
import { CLI_MAIN } from '../harness/mcp.js';
import { deployConf } from '../harness/nats-conf.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { type ServiceProcess, startScript } from '../harness/service.js';
import { startTarget, type Target } from '../harness/targets.js';

describe("the MCP bridge as the agent user of docker-compose's nats.conf", () => {
  let server: ProcessNats;
  let service: ServiceProcess;
  let serviceNc: NatsConnection;
  let target: Target;

  beforeAll(async () => {
    server = await startNatsProcess(['-c', deployConf]);
    service = await startScript(
      'dist/src/cli/main.js',
      server.url,
      ' ready ',
      { NATS_USER: 'service', NATS_PASSWORD: 'service-secret' },
      ['serve'],
    );
    serviceNc = await connectBus({ servers: server.url, user: 'service', pass: 'service-secret' });
    target = await startTarget(serviceNc, 'app.echo', { $echo: (args) => ({ echoed: args }) });
    const operatorNc = await connectBus({
      servers: server.url,
      user: 'operator',
      pass: 'operator-secret',
      inboxPrefix: '_INBOX_operator',
    });
    const operator = new BusClient(operatorNc, { timeoutMs: 5_000 });
    const echo = {
      name: 'app_echo',
      description: 'echoes',
      inputSchema: { type: 'object' as const },
      target: 'app.echo',
      op: '$echo',
    };
    await operator.request('system.tools', '$register', {
      spec: {
        key: 'mcp-app',
        title: 'App',
        description: 'an app mount',
        matrixTools: [echo],
        permissions: { approval: 'never' },
      },
    });
    operator.close();
    await operatorNc.close();
  });
  afterAll(async () => {
    target?.stop();
    await serviceNc?.close();
    await service?.stop('SIGTERM');
    await server?.stop();
  });

  it('reaches an app mount through system.dispatcher, and the call is audited under its MCP callId', async () => {
    const events: CallEvent[] = [];
    const stop = watchCalls(serviceNc, (e) => events.push(e));
    await serviceNc.flush();
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [
        CLI_MAIN,
        'mcp',
        '--profile',
        'default',
        '--refs',
        'mcp-app',
        '--user',
        'agent',
        '--password',
        'agent-secret',
        '--inbox-prefix',
        '_INBOX_agent',
      ],
      env: { ...process.env, NATS_URL: server.url } as Record<string, string>,
      stderr: 'ignore',
    });
    const mcp = new Client({ name: 'agent', version: '1.0.0' });
    try {
      await mcp.connect(transport);
      const called = await mcp.callTool({ name: 'app_echo', arguments: { hello: 'world' } });
      expect((called.content as Array<{ text: string }>)[0]?.text).toBe('{"echoed":{"hello":"world"}}');
      expect(called.isError).toBe(false);
      expect(target.count('$echo')).toBe(1);
      const event = await eventually(() => events.find((e) => e.name === 'app_echo') ?? false);
      expect(event).toMatchObject({ outcome: 'ok', target: 'app.echo', op: '$echo' });
      expect(event.callId).toMatch(/^mcp-[0-9a-f]{12}-\d+$/);
    } finally {
      await mcp.close();
      stop();
    }
  }, 30_000);
});
