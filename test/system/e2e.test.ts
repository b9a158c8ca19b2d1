import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedNatsEnv, sharedNatsUrl } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { cli, type ServiceProcess, startScript } from '../harness/service.js';

describe('the whole system, as a user runs it', () => {
  let url: string;
  let served: ServiceProcess;
  const dir = mkdtempSync(join(tmpdir(), 'e2e-'));

  beforeAll(async () => {
    url = sharedNatsUrl();
    served = await startScript('dist/src/cli/main.js', url, ' ready ', { MATRIX_TOOLS_BUCKET: `e2e-${process.pid}` }, [
      'serve',
    ]);
  });
  afterAll(async () => {
    expect(await served.stop('SIGTERM')).toBe(0);
  });

  it('lists, resolves and calls matrix_introspect from the CLI, and sees the live mounts', async () => {
    const list = await cli(url, 'list');
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/actor-readonly\s+built-in\s+0\s+matrix_introspect, session_state_read/);

    const resolve = await cli(url, 'resolve', '--profile', 'edit');
    expect(resolve.code).toBe(0);
    expect(resolve.stdout).toMatch(/matrix_invoke\s+actor-edit\s+system\.dispatcher \$invoke\s+approval/);

    const call = await cli(url, 'call', 'matrix_introspect', '--profile', 'default', '--json');
    expect(call.code).toBe(0);
    const result = JSON.parse(call.stdout) as { isError: boolean; structured: { mounts: Array<{ mount: string }> } };
    expect(result.isError).toBe(false);
    expect(result.structured.mounts.map((m) => m.mount)).toEqual(
      expect.arrayContaining([
        'system.agents',
        'system.approvals',
        'system.dispatcher',
        'system.packages',
        'system.sessions',
        'system.tools',
        'system.traces',
      ]),
    );

    // trace_query finds that call by its trace id.
    const traceId = /trace ([0-9a-f]{32})/.exec(call.stderr)?.[1];
    expect(traceId).toBeDefined();
    const trace = await cli(
      url,
      'call',
      'trace_query',
      '--profile',
      'evaluate',
      '--args',
      JSON.stringify({ traceId }),
      '--json',
    );
    expect(trace.code).toBe(0);
    const found = JSON.parse(trace.stdout) as { content: string };
    expect(found.content).toContain('matrix_introspect');
    expect(found.content).toContain('matched: 1');
  });

  it('answers with exit codes scripts can rely on', async () => {
    expect((await cli(url, 'call', 'no_such_tool', '--profile', 'default')).code).toBe(1);
    expect((await cli(url, 'call', 'matrix_introspect', '--profile', 'default', '--args', '{oops')).code).toBe(2);
    expect((await cli(url, 'resolve')).code).toBe(2);
    const down = await cli('nats://127.0.0.1:1', 'list');
    expect(down.code).toBe(3);
    expect(down.stderr).toContain('cannot reach NATS at nats://127.0.0.1:1');
  });

  it('serves the tools over MCP, calls them, and says when the list changes', async () => {
    const file = join(dir, 'extra.json');
    const extra = {
      key: 'e2e-extra',
      title: 'Extra',
      description: 'added at run time',
      permissions: { approval: 'never' },
    };
    writeFileSync(file, JSON.stringify(extra));
    const registered = await cli(url, 'register', file);
    expect(registered.code).toBe(0);
    expect(registered.stdout).toMatch(/registered e2e-extra at revision \d+/);

    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [
        fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url)),
        'mcp',
        '--profile',
        'default',
        '--refs',
        'actor-readonly,e2e-extra',
      ],
      env: { ...process.env, ...sharedNatsEnv(url), NATS_URL: url } as Record<string, string>,
      stderr: 'ignore',
    });
    const mcp = new Client({ name: 'e2e', version: '1.0.0' });
    let changed = 0;
    mcp.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      changed++;
    });
    await mcp.connect(transport);
    const { tools } = await mcp.listTools();
    expect(tools.map((t) => t.name)).toEqual(['matrix_introspect', 'session_state_read']);
    expect(tools[0]?.annotations).toMatchObject({ readOnlyHint: true });

    const called = await mcp.callTool({ name: 'matrix_introspect', arguments: { mount: 'system.tools' } });
    expect(called.isError).toBe(false);
    expect((called.content as Array<{ text: string }>)[0]?.text).toContain('$resolve');
    const refused = await mcp.callTool({ name: 'matrix_introspect', arguments: { mount: 42 } });
    expect(refused.isError).toBe(true);
    expect((refused.content as Array<{ text: string }>)[0]?.text).toContain('argument "mount" must be string');

    // A change to a context this session uses changes its tools: the client is told.
    const tool = {
      name: 'e2e_extra',
      description: 'an extra tool',
      inputSchema: { type: 'object' },
      target: 'app.extra',
      op: '$do',
    };
    writeFileSync(file, JSON.stringify({ ...extra, matrixTools: [tool] }));
    expect((await cli(url, 'register', file)).code).toBe(0);
    await eventually(() => expect(changed).toBe(1));
    expect((await mcp.listTools()).tools.map((t) => t.name)).toContain('e2e_extra');
    await mcp.close();
    expect((await cli(url, 'unregister', 'e2e-extra')).code).toBe(0);
  });
});
