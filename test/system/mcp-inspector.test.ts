/**
 * The current MCP Inspector (`@modelcontextprotocol/inspector` 2.x) in CLI mode against the HTTP
 * bridge: the built CLI `matrix-tools mcp --http` as the `agent` user of deploy/nats.conf, in
 * front of one service on real NATS, and `matrix-tools mcp` on stdio as the Inspector starts it.
 * The Inspector lists and calls the tools as a 2025-11-25 client (`--protocol-era legacy`) and as
 * a 2026-07-28 one (`modern`, where it declares the tasks extension, so the call becomes a task
 * whose result it reads through `tasks/get`).
 *
 * The Inspector is not a dependency of this project: it brings 120 packages and about 57 MB (its
 * web UI, TUI and a pinned copy of the SDK). This file runs it where it is installed, from
 * `MCP_INSPECTOR_CLI` (the path of its `clients/launcher/build/index.js`) or from node_modules
 * (`npm install --no-save @modelcontextprotocol/inspector@2.12.0`), and is skipped, saying so, elsewhere.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SecuredBus, startSecuredBus } from '../harness/identity.js';
import { agentEnv, CLI_MAIN, type HttpBridgeProcess, startHttpBridge } from '../harness/mcp.js';

const run = promisify(execFile);

/** The Inspector's launcher, if it is installed here. */
function inspectorCli(): string | undefined {
  const fromEnv = process.env.MCP_INSPECTOR_CLI;
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  const installed = fileURLToPath(
    new URL('../../node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js', import.meta.url),
  );
  return existsSync(installed) ? installed : undefined;
}

const CLI = inspectorCli();
if (CLI === undefined)
  process.stderr.write(
    'mcp-inspector.test.ts skipped: @modelcontextprotocol/inspector is not installed (set MCP_INSPECTOR_CLI or npm install --no-save it)\n',
  );

describe.skipIf(CLI === undefined)('the MCP Inspector (CLI mode) against the HTTP bridge', () => {
  let bus: SecuredBus;
  let bridge: HttpBridgeProcess;
  let home: string;

  beforeAll(async () => {
    bus = await startSecuredBus({ trust: false });
    bridge = await startHttpBridge(bus.server.url, ['--profile', 'default', '--refs', 'spy-tools']);
    // Its catalog and client files go to a home of its own, not the user's.
    home = mkdtempSync(join(tmpdir(), 'inspector-'));
  }, 90_000);
  afterAll(async () => {
    bridge?.stop();
    await bus?.stop();
    if (home !== undefined) rmSync(home, { recursive: true, force: true });
  });

  /**
   * The bridge as the Inspector reaches it: the HTTP one by its URL, or `matrix-tools mcp` started
   * by it on stdio (it hands a server only the environment given with `-e`).
   */
  const target = (transport: 'http' | 'stdio'): string[] => {
    if (transport === 'http') return [bridge.url];
    // It takes no empty value, and needs none: the server gets no environment but these.
    const env = Object.entries(agentEnv(bus.server.url))
      .filter(([, v]) => v !== '')
      .flatMap(([k, v]) => ['-e', `${k}=${v}`]);
    return [...env, process.execPath, CLI_MAIN, 'mcp', '--profile', 'default', '--refs', 'spy-tools'];
  };

  /** One Inspector run; its JSON answer. */
  const inspect = async (transport: 'http' | 'stdio', era: 'legacy' | 'modern', ...args: string[]) => {
    const { stdout } = await run(
      process.execPath,
      [CLI as string, '--cli', ...target(transport), '--protocol-era', era, '--format', 'json', '--quiet', ...args],
      { env: { ...process.env, HOME: home, MCP_CATALOG_PATH: join(home, 'mcp.json') }, timeout: 60_000 },
    );
    return JSON.parse(stdout) as { result: Record<string, unknown> };
  };

  for (const transport of ['http', 'stdio'] as const)
    for (const era of ['legacy', 'modern'] as const)
      it(`lists and calls the tools as a ${era === 'legacy' ? '2025-11-25' : '2026-07-28'} client over ${transport}`, async () => {
        const listed = await inspect(transport, era, '--method', 'tools/list');
        const tools = listed.result.tools as Array<{ name: string; execution?: unknown }>;
        expect(tools.map((t) => t.name)).toEqual(['spy_run']);
        // 2026-07-28 lists no `execution`: the server decides which calls become tasks.
        expect(tools.every((t) => t.execution === undefined)).toBe(era === 'modern');

        const before = bus.spy.seen.length;
        const called = await inspect(transport, era, '--method', 'tools/call', '--tool-name', 'spy_run');
        expect(called.result).toMatchObject({ content: [{ type: 'text', text: '{"ran":true}' }] });
        expect(called.result.isError).not.toBe(true);
        expect(bus.spy.seen.length).toBe(before + 1);
      }, 120_000);
});
