/**
 * What the console's browser tests run against, as a user runs it: the service (`matrix-tools
 * serve`) on the run's nats-server with a bucket of its own, a target mount for a registered
 * tool, and the console itself (`matrix-tools console --port 0`), each a real process.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient } from '../../../src/bus/client.js';
import { Mount } from '../../../src/bus/mount.js';
import type { ToolContextSpec } from '../../../src/registry/types.js';
import { uniqueApprovalsBucket } from '../../harness/approvals.js';
import { sharedNatsUrl, testConnection, uniqueMount } from '../../harness/bus.js';
import { contextSpec, uniqueBucket } from '../../harness/registry.js';
import { type ServiceProcess, startScript } from '../../harness/service.js';

/** The input schema of the test's weather tool: a string, an integer in a range, an enum. */
export const FORECAST_SCHEMA = {
  type: 'object' as const,
  properties: {
    city: { type: 'string', minLength: 2, description: 'the city to forecast' },
    days: { type: 'integer', minimum: 1, maximum: 7, description: 'how many days' },
    units: { enum: ['metric', 'imperial'] },
  },
  required: ['city'],
  additionalProperties: false,
};

/** Everything a test file talks to. */
export interface ConsoleStack {
  natsUrl: string;
  nc: NatsConnection;
  client: BusClient;
  /** The console's address, ending in `/`. */
  base: string;
  /** Its write token (started with `--allow-writes`). */
  token: string;
  /** What it printed when ready. */
  readyLine: string;
  /** The registered context whose `forecast` tool reaches the test's mount. */
  weather: ToolContextSpec;
  /** Registers a spec through `system.tools.$register`. */
  register(spec: ToolContextSpec): Promise<void>;
  /** Starts another console process with these flags; the caller stops it. */
  startConsole(...flags: string[]): Promise<{ process: ServiceProcess; base: string; token: string | undefined }>;
  stop(): Promise<void>;
}

/** What else the stack's service runs. */
export interface StackOptions {
  /** An `mcpServers` map the service hosts (`serve --mcp-servers FILE`), its pins in `matrix-mcp-pins`: name the servers apart. */
  mcpServers?: Record<string, unknown>;
}

/** Starts the service over a bucket pre-filled with `contexts` registered contexts, a weather mount, and the console. */
export async function startConsoleStack(contexts = 0, options: StackOptions = {}): Promise<ConsoleStack> {
  const natsUrl = sharedNatsUrl();
  const nc = await testConnection();
  const client = new BusClient(nc, { timeoutMs: 10_000 });
  const bucket = uniqueBucket();
  const kv = await new Kvm(nc).create(bucket, { history: 1 });
  const keys = Array.from({ length: contexts }, (_, i) => `ctx-${String(i).padStart(5, '0')}`);
  for (let i = 0; i < keys.length; i += 500)
    await Promise.all(keys.slice(i, i + 500).map((key) => kv.put(key, JSON.stringify(contextSpec(key)))));

  const target = uniqueMount('console');
  const mount = await new Mount(nc, {
    name: target,
    version: '1.0.0',
    description: 'A weather service for the console tests.',
    ops: {
      $forecast: {
        description: 'Forecast for a city.',
        request: FORECAST_SCHEMA,
        response: { type: 'object' },
        handle: (r: { city: string; days?: number }) => ({ city: r.city, days: r.days ?? 1, sky: 'clear' }),
      },
    },
  }).start();
  const weather = contextSpec('console-weather', {
    title: 'Weather',
    description: 'Forecasts from the test mount.',
    provides: ['weather.read'],
    matrixTools: [
      {
        name: 'forecast',
        description: 'The forecast for a city.',
        inputSchema: FORECAST_SCHEMA,
        target,
        op: '$forecast',
      },
    ],
  });

  // Deletes through matrix_invoke are refused by rule; every other gated call asks a person.
  const policy = join(mkdtempSync(join(tmpdir(), 'console-policy-')), 'policy.json');
  writeFileSync(
    policy,
    JSON.stringify({
      rules: [{ tool: 'matrix_invoke', op: '$delete', decision: 'deny', reason: 'no deletes from the console tests' }],
      default: 'ask',
    }),
  );
  const approvalsBucket = uniqueApprovalsBucket();
  const hosting: string[] = [];
  if (options.mcpServers !== undefined) {
    const file = join(mkdtempSync(join(tmpdir(), 'console-mcp-')), 'mcp.json');
    writeFileSync(file, JSON.stringify({ mcpServers: options.mcpServers }));
    hosting.push('--mcp-servers', file);
  }
  const service = await startScript(
    'dist/src/cli/main.js',
    natsUrl,
    ' ready ',
    { MATRIX_TOOLS_BUCKET: bucket, MATRIX_APPROVALS_BUCKET: approvalsBucket },
    ['serve', '--policy', policy, ...hosting],
    // Each hosted MCP server is a Node start-up before the ready line.
    options.mcpServers === undefined ? undefined : 30_000,
  );
  const register = async (spec: ToolContextSpec) => {
    await client.request('system.tools', '$register', { spec });
  };
  await register(weather);
  const startConsole = async (...flags: string[]) => {
    const proc = await startScript('dist/src/cli/main.js', natsUrl, 'console ready on', {}, [
      'console',
      '--port',
      '0',
      ...flags,
    ]);
    const base = /console ready on (\S+)/.exec(proc.output())?.[1] as string;
    const token = /write token: (\S+)/.exec(proc.output())?.[1];
    return { process: proc, base, token };
  };
  const main = await startConsole('--allow-writes');
  return {
    natsUrl,
    nc,
    client,
    base: main.base,
    token: main.token as string,
    readyLine: /console ready on .*/.exec(main.process.output())?.[0] ?? '',
    weather,
    register,
    startConsole,
    stop: async () => {
      const consoleExit = await main.process.stop('SIGTERM');
      const serviceExit = await service.stop('SIGTERM');
      await mount.stop();
      client.close();
      await (await new Kvm(nc).open(bucket)).destroy();
      await (await new Kvm(nc).open(approvalsBucket)).destroy();
      if (consoleExit !== 0 || serviceExit !== 0)
        throw new Error(`console exited ${consoleExit}, service ${serviceExit}`);
    },
  };
}
