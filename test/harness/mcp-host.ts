/**
 * A world for the MCP host's tests: a registry on a KV bucket of its own, `system.dispatcher`
 * (with `system.approvals` on a bucket of its own), and an MCP host whose servers the test
 * names; the stdio servers are the npm reference servers and `test/fixtures/mcp-fixture.mjs`.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient } from '../../src/bus/client.js';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { localToolSource } from '../../src/dispatcher/session-cache.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { parseServers, type ServerConfig } from '../../src/mcp/host/config.js';
import { type McpHost, type McpHostOptions, startMcpHost } from '../../src/mcp/host/host.js';
import type { ResolveRequest } from '../../src/registry/types.js';
import { ApprovalsClient, startApprovals, uniqueApprovalsBucket } from './approvals.js';
import { testConnection } from './bus.js';
import { type Instance, startInstance, uniqueBucket } from './registry.js';

const modules = fileURLToPath(new URL('../../node_modules/@modelcontextprotocol/', import.meta.url));
/** The fixture server's script. */
export const FIXTURE = fileURLToPath(new URL('../fixtures/mcp-fixture.mjs', import.meta.url));

/** The `mcpServers` entry of an npm reference server (`everything`, `memory`, `filesystem`). */
export function referenceServer(name: 'everything' | 'memory' | 'filesystem', args: string[] = [], extra = {}) {
  return { command: process.execPath, args: [join(modules, `server-${name}`, 'dist', 'index.js'), ...args], ...extra };
}

/** The `mcpServers` entry of the fixture in `mode`. */
export function fixtureServer(mode = 'normal', extra = {}) {
  return { command: process.execPath, args: [FIXTURE, mode], ...extra };
}

/** A directory of its own for a filesystem server. */
export function scratchDir(): string {
  return mkdtempSync(join(tmpdir(), 'mcp-host-fs-'));
}

let n = 0;
/** A pins bucket no other test uses. */
export function uniquePinsBucket(): string {
  return `test-mcp-pins-${process.pid}-${Date.now().toString(36)}-${n++}`;
}

/** The running world. */
export interface HostWorld {
  nc: NatsConnection;
  registry: Instance;
  dispatcher: Dispatcher;
  dispatcherMount: Mount;
  approvals: Mount;
  person: ApprovalsClient;
  client: BusClient;
  host: McpHost;
  pinsBucket: string;
  /** `system.dispatcher.$call` of `name` in a session of `refs`. */
  call(
    refs: string[],
    name: string,
    args: Record<string, unknown>,
    options?: Parameters<BusClient['request']>[3],
  ): Promise<ToolResult>;
  /** Starts another host on the same pins bucket (two hosts of one name). */
  startHost(servers: ServerConfig[], options?: Partial<McpHostOptions>): Promise<McpHost>;
  stop(): Promise<void>;
}

/** Where the world runs: a connection of its own (default the shared server's), and whether it audits (default not). */
export interface WorldOptions {
  nc?: NatsConnection;
  audit?: boolean;
}

/** Starts the world with the servers of `mcpServers`. */
export async function startHostWorld(
  mcpServers: Record<string, unknown>,
  options: Partial<McpHostOptions> = {},
  world: WorldOptions = {},
): Promise<HostWorld> {
  const nc = world.nc ?? (await testConnection());
  const registry = await startInstance(nc, uniqueBucket());
  const approvalsBucket = uniqueApprovalsBucket();
  const approvals = await startApprovals(nc, approvalsBucket);
  const dispatcher = new Dispatcher(nc, {
    source: localToolSource(registry.registry),
    approvalsBucket,
    audit: world.audit ?? false,
  });
  const dMount = await dispatcherMount(nc, { dispatcher }).start();
  const pinsBucket = uniquePinsBucket();
  const hosts: McpHost[] = [];
  const startHost = async (servers: ServerConfig[], more: Partial<McpHostOptions> = {}) => {
    const host = await startMcpHost(nc, { servers, pinsBucket, ...options, ...more });
    hosts.push(host);
    return host;
  };
  const host = await startHost(parseServers({ mcpServers }));
  const client = new BusClient(nc, { timeoutMs: 20_000 });
  let calls = 0;
  return {
    nc,
    registry,
    dispatcher,
    dispatcherMount: dMount,
    approvals,
    person: new ApprovalsClient(nc),
    client,
    host,
    pinsBucket,
    startHost,
    call: (refs, name, args, more = {}) => {
      const session: ResolveRequest = { profile: 'test', toolContextRefs: refs };
      return client.request<ToolResult>(
        'system.dispatcher',
        '$call',
        { session, call: { id: `c${calls++}`, name, arguments: args } },
        { principal: 'agent:test', session: 's1', ...more },
      );
    },
    stop: async () => {
      client.close();
      await Promise.all(hosts.map((h) => h.stop()));
      await dMount.stop();
      dispatcher.close();
      await approvals.stop();
      await registry.stop();
    },
  };
}
