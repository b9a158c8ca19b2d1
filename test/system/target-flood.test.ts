/**
 * Target traffic that cannot be aimed at: under deploy/nats.conf a mount's user may publish onto
 * the service's reply inbox (`_INBOX_targets.>`), and it learns the inbox's prefix from one
 * request. A mount of its own user (in its own process) floods progress reports at full rate
 * during a call, during a task, and junk onto the inbox with no call of its in flight. Each call
 * it floods fails, blaming it; what it sends past the bound, and its junk, never reach the
 * service (nats-server's own count of messages it delivered to the service's connections); and
 * another agent's calls keep their pace meanwhile: the victim's p99 stays within a multiple of its
 * idle p99 measured in the same run (never an absolute time: the machine is shared).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import type { Task } from '../../src/tasks/types.js';
import { tracked } from '../harness/children.js';
import { eventually } from '../harness/eventually.js';
import { type SecuredBus, startSecuredBus } from '../harness/identity.js';
import { freePort } from '../harness/nats-server.js';

const flooderScript = fileURLToPath(new URL('../harness/progress-flooder.mjs', import.meta.url));

/** How long the flooding mount floods each request, in s: longer than a measurement. */
const FLOOD_SECONDS = 5;
/** How long the victim's calls are timed, idle and under each flood, in ms. */
const MEASURE_MS = 3_000;
/**
 * How much slower the victim's p99 may be under a flood than idle. Generous, for a shared
 * machine where the flooder and nats-server take a core meanwhile; before target traffic was
 * bounded the victim waited 100–1000× its idle p99.
 */
const SLOWDOWN = 20;

const floodContext = {
  key: 'flood-tools',
  title: 'Flood',
  description: 'tools on a mount that floods',
  matrixTools: [
    {
      name: 'flood_run',
      description: 'floods progress',
      inputSchema: { type: 'object' },
      target: 'app.flood',
      op: '$flood',
    },
    {
      name: 'flood_junk',
      description: 'floods the inbox',
      inputSchema: { type: 'object' },
      target: 'app.flood',
      op: '$junk',
    },
  ],
  permissions: { approval: 'never' },
};
const victimSession = { profile: 'default', toolContextRefs: ['spy-tools'] };
const attackerSession = { profile: 'default', toolContextRefs: ['flood-tools'] };

/** The `q` quantile of `values` (nearest rank). */
function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;
}

describe('a mount that floods the service with replies it did not ask for', () => {
  let bus: SecuredBus;
  let victim: BusClient;
  let attacker: BusClient;
  let victimGrant: string;
  let attackerGrant: string;
  let idleP99: number;
  let floods: string[];
  let stopFlooder: () => void;
  let monitorPort: number;

  /** The service's connections as nats-server's monitoring lists them. */
  async function serviceConnections(): Promise<Array<{ name?: string; out_msgs: number }>> {
    const connz = (await (await fetch(`http://127.0.0.1:${monitorPort}/connz`)).json()) as {
      connections: Array<{ name?: string; out_msgs: number }>;
    };
    return connz.connections.filter((c) => c.name?.startsWith('matrix-tool-registry'));
  }

  /** Messages nats-server has delivered to the service's connections so far (`out_msgs`). */
  async function deliveredToService(): Promise<number> {
    return (await serviceConnections()).reduce((sum, c) => sum + c.out_msgs, 0);
  }

  /** Milliseconds of each victim call (a granted spy_run that reaches its target) for `ms`, at least 5 calls. */
  async function victimCalls(ms: number): Promise<number[]> {
    const times: number[] = [];
    const until = performance.now() + ms;
    while (performance.now() < until || times.length < 5) {
      const started = performance.now();
      const result = await victim.request<ToolResult>(
        'system.dispatcher',
        '$call',
        { session: victimSession, call: { id: 'v', name: 'spy_run', arguments: {} } },
        { grant: victimGrant },
      );
      expect(result.isError).not.toBe(true);
      times.push(performance.now() - started);
    }
    return times;
  }

  /** The victim's p99 under a flood, logged with its p50 beside the idle figure. */
  async function victimUnder(flood: string): Promise<number> {
    const times = await victimCalls(MEASURE_MS);
    const p50 = quantile(times, 0.5);
    const p99 = quantile(times, 0.99);
    console.log(
      `${flood}: victim p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms (${times.length} calls; idle p99 ${idleP99.toFixed(1)} ms)`,
    );
    return p99;
  }

  /** A call of the attacker's to a tool of the flooding mount; `more` adds to the `$call` body. */
  function attackerCall(name: string, more: Record<string, unknown> = {}): Promise<ToolResult | { task: Task }> {
    return attacker.request(
      'system.dispatcher',
      '$call',
      { session: attackerSession, call: { id: 'a', name, arguments: {} }, ...more },
      { grant: attackerGrant, timeoutMs: 60_000, onProgress: () => {} },
    );
  }

  beforeAll(async () => {
    monitorPort = await freePort();
    bus = await startSecuredBus({ mounts: ['flood'], natsArgs: ['-m', String(monitorPort)] });
    const operator = new BusClient(await bus.connect('operator'), { timeoutMs: 10_000 });
    await operator.request('system.tools', '$register', { spec: floodContext });
    operator.close();
    victimGrant = bus.grant({ principal: 'agent:victim', session: 'sess-victim', resolve: victimSession });
    attackerGrant = bus.grant({ principal: 'agent:flood', session: 'sess-flood', resolve: attackerSession });
    victim = new BusClient(await bus.connect('agent'), { timeoutMs: 60_000 });
    attacker = new BusClient(await bus.connect('agent2'), { timeoutMs: 60_000 });
    const spec = {
      servers: bus.server.url,
      user: 'flood',
      pass: 'flood-secret',
      mount: 'app.flood',
      seconds: FLOOD_SECONDS,
    };
    const child = tracked(
      spawn(process.execPath, [flooderScript, JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'inherit'] }),
    );
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    floods = [];
    child.stdout.on('data', () => {
      floods = [...out.matchAll(/sent (\d+)/g)].map((m) => m[1] ?? '');
    });
    stopFlooder = () => child.kill('SIGTERM');
    await eventually(() => expect(out).toContain('mounted'), { timeoutMs: 10_000 });
    await victimCalls(500);
    idleP99 = quantile(await victimCalls(MEASURE_MS), 0.99);
  }, 60_000);

  afterAll(async () => {
    stopFlooder?.();
    victim?.close();
    attacker?.close();
    await bus?.stop();
  });

  /** Waits for the flood of the mount's `n`th request to end (its reports sent); returns how many it sent. */
  async function floodEnded(n: number): Promise<number> {
    await eventually(() => expect(floods.length).toBeGreaterThanOrEqual(n), { timeoutMs: 20_000 });
    return Number(floods[n - 1]);
  }

  it('calls targets on a connection of its own', async () => {
    const names = (await serviceConnections()).map((c) => c.name).sort();
    expect(names).toEqual(['matrix-tool-registry', 'matrix-tool-registry-targets']);
  });

  it("fails a call whose target floods progress, blaming the target, and another agent's calls keep their pace", async () => {
    const before = await deliveredToService();
    const call = attackerCall('flood_run');
    const p99 = await victimUnder('progress flood during a call');
    const result = (await call) as ToolResult;
    const sent = await floodEnded(1);
    const delivered = (await deliveredToService()) - before;
    console.log(`progress flood during a call: the mount sent ${sent} reports, the service got ${delivered} messages`);
    expect(sent).toBeGreaterThan(10_000);
    expect(delivered).toBeLessThan(sent / 10);
    expect(result.isError).toBe(true);
    expect(result.error?.code).toBe('unavailable');
    expect(result.content).toMatch(/app\.flood sent \d+ messages/);
    expect(p99).toBeLessThan(SLOWDOWN * idleP99);
  }, 60_000);

  it("fails a task whose target floods progress nobody asked for, and another agent's calls keep their pace", async () => {
    const before = await deliveredToService();
    const started = (await attackerCall('flood_run', { task: { ttlMs: 60_000 } })) as { task: Task };
    expect(started.task.status).toBe('working');
    const p99 = await victimUnder('progress flood during a task');
    const result = await attacker.request<ToolResult>(
      'system.tasks',
      '$result',
      { taskId: started.task.taskId, waitMs: 20_000 },
      { grant: attackerGrant, timeoutMs: 30_000 },
    );
    const sent = await floodEnded(2);
    const delivered = (await deliveredToService()) - before;
    console.log(`progress flood during a task: the mount sent ${sent} reports, the service got ${delivered} messages`);
    expect(delivered).toBeLessThan(sent / 10);
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/app\.flood sent \d+ messages/);
    expect(p99).toBeLessThan(SLOWDOWN * idleP99);
  }, 60_000);

  it("drops junk sent to the service's reply inbox with no call in flight, and another agent's calls keep their pace", async () => {
    const before = await deliveredToService();
    const answered = (await attackerCall('flood_junk')) as ToolResult;
    expect(answered.isError).toBe(false);
    const p99 = await victimUnder('junk to the reply inbox');
    const sent = await floodEnded(3);
    const delivered = (await deliveredToService()) - before;
    console.log(`junk to the reply inbox: the mount sent ${sent} messages, the service got ${delivered}`);
    expect(sent).toBeGreaterThan(10_000);
    expect(delivered).toBeLessThan(sent / 10);
    expect(p99).toBeLessThan(SLOWDOWN * idleP99);
  }, 60_000);
});
