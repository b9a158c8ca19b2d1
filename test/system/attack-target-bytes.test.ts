/**
 * Attack (issue 41, claim "a hostile target's progress reports are counted ... a flood fails with
 * TargetFloodError without hurting other callers"): what the service counts of a target's traffic
 * is messages, never bytes. Under deploy/nats.conf a mount's user may publish messages up to the
 * server's max_payload (1 MB) onto the reply subject of a request it was sent, and the per-request
 * bound lets 1,000 of them through at once (the per-target bound 5,000): ~1 GB onto one call,
 * ~5 GB onto a few, every byte of it read by the service's process (the event loop that also
 * serves every other agent's calls) before it is counted and dropped. A mount of its own user, in
 * its own process, sends 900 reports of ~1 MB onto each of four concurrent calls, within both
 * bounds. Found on 2026-12-06 (3 runs): nats-server sent ~2.2 GB and cut the service's
 * connection to targets 19 times as a slow consumer (pending bytes); no flooded call was stopped
 * as a flood (each waited out its 30 s deadline, holding its slot); a victim call to app.spy, a
 * mount that did nothing wrong, lost its reply in a cut and waited 30 s; victim p99 6.6 → 300 ms.
 * What should hold: the flooding calls fail blaming the target long before gigabytes are read (a
 * bound on bytes, not only messages), the connection to targets is never cut, no other agent's
 * call fails, and their median stays within a multiple of idle in the same run (as
 * test/system/target-flood.test.ts asks of a flood of small reports), their p99 within it or a second.
 * The same holds of replies (claim: "a hostile target cannot ... starve other callers' calls"):
 * one principal may keep 256 calls in flight to a target, and 64 of them answered with ~1 MB
 * replies each (text, cut to the cap) made nats-server cut the connection to targets once, and a
 * victim call waited out its 30 s deadline (victim p99 7 → 936 ms).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { tracked } from '../harness/children.js';
import { eventually } from '../harness/eventually.js';
import { type SecuredBus, startSecuredBus } from '../harness/identity.js';
import { freePort } from '../harness/nats-server.js';

const flooderScript = fileURLToPath(new URL('../harness/big-flooder.mjs', import.meta.url));

/** Reports a call of the hostile mount sends: under the per-request burst of 1,000. */
const REPORTS = 900;
/** Bytes of each report: under the server's max_payload of 1 MiB with its headers. */
const REPORT_BYTES = 1_000_000;
/** Concurrent flooded calls: 3,600 reports in all, under the per-target burst of 5,000. */
const CALLS = 4;
/** The same multiple of idle test/system/target-flood.test.ts allows a flood of small reports. */
const SLOWDOWN = 20;
/** A victim's median under the flood: within the multiple of its idle one (25 ms at least). */
const paceBound = (idleP50: number) => Math.max(SLOWDOWN * idleP50, 25);
/**
 * A victim's p99 under the flood: within the multiple of idle, or a second. Tens of MiB read and
 * refused on 2 shared cores cost other callers CPU (p99 28-136 ms against 3-23 ms idle, CI's run
 * among other test files); what must not come back is a call held to its 30 s deadline by a cut.
 */
const tailBound = (idleP99: number) => Math.max(SLOWDOWN * idleP99, 1_000);
/** Large replies the attacker keeps in flight at once: a quarter of the per-principal bound of 256. */
const LANES = 64;
/** How long the hostile mount holds each call before its ~1 MB reply, in ms. */
const REPLY_DELAY_MS = 200;
/** How long the attacker keeps its large replies coming, in ms. */
const REPLY_FLOOD_MS = 6_000;
/** How long the victim's calls are timed idle, in ms. */
const MEASURE_MS = 3_000;

const bigContext = {
  key: 'big-tools',
  title: 'Big',
  description: 'tools on a mount that sends large messages',
  matrixTools: [
    {
      name: 'big_reports',
      description: 'reports progress in large messages',
      inputSchema: { type: 'object' },
      target: 'app.big',
      op: '$reports',
    },
    {
      name: 'big_reply',
      description: 'answers with one large reply',
      inputSchema: { type: 'object' },
      target: 'app.big',
      op: '$big',
    },
  ],
  permissions: { approval: 'never' },
};
const victimSession = { profile: 'default', toolContextRefs: ['spy-tools'] };
const attackerSession = { profile: 'default', toolContextRefs: ['big-tools'] };

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;
}

describe('a mount that sends large progress reports, each within the count', () => {
  let bus: SecuredBus;
  let victim: BusClient;
  let attacker: BusClient;
  let victimGrant: string;
  let attackerGrant: string;
  let idleP50: number;
  let idleP99: number;
  let out = '';
  let stopFlooder: () => void;
  let monitorPort: number;

  /** nats-server's counts: bytes it sent to all clients, and clients it cut as slow consumers. */
  async function varz(): Promise<{ out_bytes: number; slow_consumers: number }> {
    return (await (await fetch(`http://127.0.0.1:${monitorPort}/varz`)).json()) as {
      out_bytes: number;
      slow_consumers: number;
    };
  }

  /** Victim calls that failed, as `<code>: <content>`. */
  const victimFailures: string[] = [];

  /** Milliseconds of one victim call (a granted spy_run); a failure is kept in `victimFailures`. */
  async function victimCall(): Promise<number> {
    const started = performance.now();
    const result = await victim.request<ToolResult>(
      'system.dispatcher',
      '$call',
      { session: victimSession, call: { id: 'v', name: 'spy_run', arguments: {} } },
      { grant: victimGrant },
    );
    if (result.isError) victimFailures.push(`${result.error?.code}: ${result.content.slice(0, 300)}`);
    return performance.now() - started;
  }

  /** The nats-server client ids of the service's connection to targets (a new one after each cut). */
  async function targetsCid(): Promise<number[]> {
    const connz = (await (await fetch(`http://127.0.0.1:${monitorPort}/connz?state=all`)).json()) as {
      connections: Array<{ name?: string; cid: number; reason?: string }>;
    };
    return connz.connections.filter((c) => c.name === 'matrix-tool-registry-targets').map((c) => c.cid);
  }

  beforeAll(async () => {
    monitorPort = await freePort();
    bus = await startSecuredBus({ mounts: ['big'], natsArgs: ['-m', String(monitorPort)] });
    const operator = new BusClient(await bus.connect('operator'), { timeoutMs: 10_000 });
    await operator.request('system.tools', '$register', { spec: bigContext });
    operator.close();
    victimGrant = bus.grant({ principal: 'agent:victim', session: 'sess-victim', resolve: victimSession });
    attackerGrant = bus.grant({ principal: 'agent:big', session: 'sess-big', resolve: attackerSession });
    victim = new BusClient(await bus.connect('agent'), { timeoutMs: 60_000 });
    attacker = new BusClient(await bus.connect('agent2'), { timeoutMs: 120_000 });
    const spec = {
      servers: bus.server.url,
      user: 'big',
      pass: 'big-secret',
      mount: 'app.big',
      reports: REPORTS,
      bytes: REPORT_BYTES,
      delayMs: REPLY_DELAY_MS,
      // Text, not bytes: the reply's content is then cut to the cap (bytes escape it:
      // test/integration/attack-result-bytes.test.ts), so what is measured is its transfer alone.
      text: true,
    };
    const child = tracked(
      spawn(process.execPath, [flooderScript, JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'inherit'] }),
    );
    child.stdout.on('data', (chunk) => (out += chunk));
    stopFlooder = () => child.kill('SIGTERM');
    await eventually(() => expect(out).toContain('mounted'), { timeoutMs: 10_000 });
    for (let i = 0; i < 20; i++) await victimCall();
    const idle: number[] = [];
    const until = performance.now() + MEASURE_MS;
    while (performance.now() < until) idle.push(await victimCall());
    idleP50 = quantile(idle, 0.5);
    idleP99 = quantile(idle, 0.99);
    expect(victimFailures).toEqual([]);
  }, 60_000);

  afterAll(async () => {
    stopFlooder?.();
    victim?.close();
    attacker?.close();
    await bus?.stop();
  });

  it("stops calls whose target sends gigabytes of reports, and another agent's calls keep their pace", async () => {
    const before = await varz();
    const cidsBefore = await targetsCid();
    let flooding = true;
    const calls = Promise.all(
      Array.from({ length: CALLS }, (_, i) =>
        attacker.request<ToolResult>(
          'system.dispatcher',
          '$call',
          { session: attackerSession, call: { id: `a${i}`, name: 'big_reports', arguments: {} } },
          { grant: attackerGrant, timeoutMs: 120_000, onProgress: () => {} },
        ),
      ),
    ).finally(() => {
      flooding = false;
    });
    const times: number[] = [];
    // The victim calls for as long as the flood lasts (at least 5 calls).
    while (flooding || times.length < 5) times.push(await victimCall());
    const results = await calls;
    // The mount has sent all it had (the next test starts from a quiet bus).
    await eventually(() => expect([...out.matchAll(/sent \d+/g)]).toHaveLength(CALLS), { timeoutMs: 60_000 });
    const after = await varz();
    const read = after.out_bytes - before.out_bytes;
    const cut = after.slow_consumers - before.slow_consumers;
    const cidsAfter = await targetsCid();
    // nats-server's own record of why it closed each connection of the service to targets.
    const closed = (await (await fetch(`http://127.0.0.1:${monitorPort}/connz?state=closed`)).json()) as {
      connections: Array<{ name?: string; reason?: string }>;
    };
    const cutTargets = closed.connections.filter(
      (c) => c.name === 'matrix-tool-registry-targets' && /slow consumer/i.test(c.reason ?? ''),
    ).length;
    console.log(
      `the service's connection to targets: ids ${cidsBefore} -> ${cidsAfter}, ${cutTargets} closed by nats-server as a slow consumer`,
    );
    const failures = victimFailures.splice(0);
    const p50 = quantile(times, 0.5);
    const p99 = quantile(times, 0.99);
    const stopped = results.filter((r) => r.isError && /app\.big sent/.test(r.content)).length;
    console.log(
      `${CALLS} calls × ${REPORTS} reports of ${REPORT_BYTES} bytes: nats-server sent ${(read / 2 ** 20).toFixed(0)} MiB and cut ${cut} slow consumers; ${stopped}/${CALLS} calls stopped as a flood; victim p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms over ${times.length} calls (idle p99 ${idleP99.toFixed(1)} ms); ${failures.length} victim calls failed${failures.length > 0 ? `, first: ${failures[0]}` : ''}`,
    );
    for (const r of results) console.log(`flooded call: ${r.isError ? r.content.slice(0, 300) : 'answered'}`);
    // Another agent's calls, to another mount, are not failed by this one's traffic: the
    // service's connection to targets is never cut under it (each cut loses every reply in flight
    // on it, and their callers wait out their whole deadline).
    expect(cutTargets).toBe(0);
    expect(failures).toEqual([]);
    // What should hold: the service stops reading a target that sends it gigabytes (a bound of
    // bytes per request: a few MiB of reports, each a few hundred bytes when honest) ...
    expect(read).toBeLessThan(256 * 2 ** 20);
    expect(stopped).toBe(CALLS);
    // ... and another agent's calls keep their pace meanwhile.
    expect(p50).toBeLessThan(paceBound(idleP50));
    expect(p99).toBeLessThan(tailBound(idleP99));
  }, 180_000);

  it("answers a caller's small calls while another keeps 64 large replies in flight", async () => {
    const before = await varz();
    const cidsBefore = await targetsCid();
    let running = true;
    let answered = 0;
    const lanes = Array.from({ length: LANES }, async (_, lane) => {
      for (let i = 0; running; i++) {
        const r = await attacker.request<ToolResult>(
          'system.dispatcher',
          '$call',
          { session: attackerSession, call: { id: `r${lane}-${i}`, name: 'big_reply', arguments: {} } },
          { grant: attackerGrant, timeoutMs: 120_000 },
        );
        if (!r.isError) answered++;
      }
    });
    const stop = setTimeout(() => {
      running = false;
    }, REPLY_FLOOD_MS);
    const times: number[] = [];
    while (running || times.length < 5) times.push(await victimCall());
    clearTimeout(stop);
    await Promise.all(lanes);
    const after = await varz();
    const cut = (await targetsCid()).filter((cid) => !cidsBefore.includes(cid)).length;
    const failures = victimFailures.splice(0);
    console.log(
      `${LANES} lanes of ~${REPORT_BYTES}-byte replies: ${answered} answered, nats-server sent ${((after.out_bytes - before.out_bytes) / 2 ** 20).toFixed(0)} MiB and cut ${after.slow_consumers - before.slow_consumers} slow consumers (${cut} new connections to targets); victim p50 ${quantile(times, 0.5).toFixed(1)} ms, p99 ${quantile(times, 0.99).toFixed(1)} ms over ${times.length} calls (idle p99 ${idleP99.toFixed(1)} ms); ${failures.length} victim calls failed${failures.length > 0 ? `, first: ${failures[0]}` : ''}`,
    );
    // What should hold: the connection to targets is never cut under large replies a principal
    // may ask for, no other agent's call fails, and their p99 stays within a multiple of idle.
    expect(cut).toBe(0);
    expect(failures).toEqual([]);
    expect(quantile(times, 0.5)).toBeLessThan(paceBound(idleP50));
    expect(quantile(times, 0.99)).toBeLessThan(tailBound(idleP99));
  }, 180_000);
});
