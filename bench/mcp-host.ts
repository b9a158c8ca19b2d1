/**
 * `node dist/bench/mcp-host.js`: what the MCP host costs. Three rows, interleaved in one run on
 * one machine, each calling an echo tool: `$call → host → stdio server` (the service with
 * `--mcp-servers`, everything's `echo` behind `system.dispatcher.$call`), the MCP SDK client
 * calling the same server directly over stdio (the limit), and the Streamable HTTP gateway of
 * `mcp-gateway.ts` (the peer). Starts its own nats-server (`NATS_SERVER_BIN`, else
 * `nats-server` on PATH); prints req/s and p50/p99 per row at each concurrency.
 * BENCH_SECONDS (default 3) is each row's time at each concurrency, in 5 rounds.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { BusClient } from '../src/bus/client.js';
import { connectBus } from '../src/bus/connect.js';
import type { ToolResult } from '../src/dispatcher/types.js';
import { measureInterleaved } from './measure.js';
import { here, spawnReady, stopChild } from './stack.js';

const SECONDS = Number(process.env.BENCH_SECONDS) || 3;
const CONCURRENCY = [1, 64] as const;
const everything = here('../../node_modules/@modelcontextprotocol/server-everything/dist/index.js');

const dir = mkdtempSync(join(tmpdir(), 'bench-mcp-host-'));
const port = 20_000 + Math.floor(Math.random() * 20_000);
const nats: ChildProcess = spawn(
  process.env.NATS_SERVER_BIN ?? 'nats-server',
  ['-p', String(port), '-js', '-sd', join(dir, 'js')],
  { stdio: 'ignore' },
);
const url = `nats://127.0.0.1:${port}`;
const children: ChildProcess[] = [];
try {
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const mcpJson = join(dir, 'mcp.json');
  writeFileSync(
    mcpJson,
    JSON.stringify({ mcpServers: { everything: { command: process.execPath, args: [everything, 'stdio'] } } }),
  );
  const service = await spawnReady(here('../src/cli/main.js'), { NATS_URL: url }, 'stderr', ' ready on ', [
    'serve',
    '--no-reference',
    '--mcp-servers',
    mcpJson,
  ]);
  const gateway = await spawnReady(here('./mcp-gateway.js'), {}, 'stdout', 'ready');
  children.push(service, gateway);
  const [, gatewayPort] = /ready (\d+) (\d+)/.exec(gateway.said) ?? [];

  const client = new BusClient(await connectBus({ servers: url }), { timeoutMs: 30_000 });
  const session = { profile: 'bench', toolContextRefs: ['mcp.everything'] };
  let n = 0;
  const viaHost = async () => {
    const r = await client.request<ToolResult>('system.dispatcher', '$call', {
      session,
      call: { id: `b${n++}`, name: 'everything_echo', arguments: { message: 'hello' } },
    });
    if (r.isError) throw new Error(r.content);
  };
  const direct = new McpClient({ name: 'bench-direct', version: '1.0.0' });
  await direct.connect(
    new StdioClientTransport({ command: process.execPath, args: [everything, 'stdio'], stderr: 'ignore' }),
  );
  const viaGateway = new McpClient({ name: 'bench-via-gateway', version: '1.0.0' });
  await viaGateway.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${gatewayPort}/mcp`)));
  await viaHost();

  const rows = ['$call → host → stdio server', 'MCP SDK client → stdio server (direct)', 'MCP Streamable HTTP gateway'];
  const ops = [
    viaHost,
    () => direct.callTool({ name: 'echo', arguments: { message: 'hello' } }),
    () => viaGateway.callTool({ name: 'echo', arguments: { q: 'hello' } }),
  ];
  for (const inFlight of CONCURRENCY) {
    const figures = await measureInterleaved(ops, inFlight, SECONDS, 5);
    for (const [i, f] of figures.entries())
      process.stdout.write(
        `${String(inFlight).padStart(3)} in flight  ${rows[i]?.padEnd(42)} ${f.rps.toFixed(0).padStart(7)} req/s  p50 ${(f.p50 / 1000).toFixed(2)} ms  p99 ${(f.p99 / 1000).toFixed(2)} ms  errors ${f.errors}\n`,
      );
    const [host, limit, peer] = figures.map((f) => f.rps);
    if (host !== undefined && limit !== undefined && peer !== undefined)
      process.stdout.write(
        `${String(inFlight).padStart(3)} in flight  host/direct ${(host / limit).toFixed(2)}  host/gateway ${(host / peer).toFixed(2)}\n`,
      );
  }
  client.close();
  await client.nc.close();
  await direct.close();
  await viaGateway.close();
} finally {
  for (const child of children) await stopChild(child, 'SIGTERM');
  nats.kill('SIGTERM');
}
