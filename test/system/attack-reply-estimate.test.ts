/**
 * Attack (issue 41, docs/target-traffic.md, claims "a hostile target no longer makes nats-server
 * cut the connection every target shares" and "a cut connection fails the calls on it": so no
 * other caller's call may fail for a target's traffic). The budget of a target's replies in flight
 * (src/dispatcher/reply-budget.ts) admits calls by the size its replies are *taken to be*, and that
 * estimate is learned from what the target chose to send before:
 *
 * 1. Small, then huge. The estimate halves with every smaller reply (reply-budget.ts:119), so a
 *    mount that answers ~20 calls with 5 bytes is taken to answer ~5 bytes, and one principal may
 *    then have 256 calls in flight to it (TargetSlots' per-principal bound; the budget admits them
 *    all). The mount holds 200 of them and answers them all at once with ~1 MB *replies*: replies
 *    are not counted in the per-target bucket of bytes (client.ts:395-407 counts only progress
 *    reports), and each is within its request's 2 MiB bucket. ~200 MB land on the one connection
 *    all targets share, past nats-server's 64 MB max_pending.
 * 2. Headers. The estimate is of the reply's body only (`bytes: msg.data.length`, client.ts:412),
 *    never its headers: a mount answering each call with 5 bytes of body and ~1 MB of headers is
 *    taken to answer 5 bytes whatever it sends, and 200 such calls in flight are ~200 MB.
 *
 * Meanwhile another agent keeps calls in flight to app.spy (a mount that did nothing wrong). What
 * should hold: nats-server never cuts the service's connection to targets under one target's
 * replies, and no other agent's call fails.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { type SecuredBus, startSecuredBus } from '../harness/identity.js';
import { type MountProcess, startMountProcess } from '../harness/mount-process.js';
import { freePort } from '../harness/nats-server.js';

/** Bytes of each large reply (body, or headers): within max_payload (1 MiB) with the rest. */
const BYTES = 1_000_000;
/** Calls answered small first: the estimate halves each time, 1 MiB to ~5 bytes. */
const BAITS = 24;
/** Calls held and answered large at once: under one principal's 256 calls in flight. */
const HELD = 200;

const baitContext = {
  key: 'bait-tools',
  title: 'Bait',
  description: 'tools on a mount that answers small, then large',
  matrixTools: [
    { name: 'bait_small', description: 'small', inputSchema: { type: 'object' }, target: 'app.bait', op: '$bait' },
    { name: 'bait_burst', description: 'large', inputSchema: { type: 'object' }, target: 'app.bait', op: '$burst' },
    { name: 'bait_hdr', description: 'headers', inputSchema: { type: 'object' }, target: 'app.bait', op: '$hdr' },
  ],
  permissions: { approval: 'never' },
};
/** The victim's tool: app.spy's `$hold`, answered after 3 s (so always in flight during a burst). */
const victimContext = {
  key: 'victim-tools',
  title: 'Victim',
  description: 'a slow honest tool',
  matrixTools: [
    { name: 'spy_hold', description: 'slow', inputSchema: { type: 'object' }, target: 'app.spy', op: '$hold' },
  ],
  permissions: { approval: 'never' },
};
const victimSession = { profile: 'default', toolContextRefs: ['victim-tools'] };
const attackerSession = { profile: 'default', toolContextRefs: ['bait-tools'] };

describe('a mount that makes the service take its replies to be small, then answers large', () => {
  let bus: SecuredBus;
  let victim: BusClient;
  let attacker: BusClient;
  let victimGrant: string;
  let attackerGrant: string;
  let mount: MountProcess | undefined;
  let monitorPort: number;

  async function slowConsumers(): Promise<number> {
    const v = (await (await fetch(`http://127.0.0.1:${monitorPort}/varz`)).json()) as { slow_consumers: number };
    return v.slow_consumers;
  }

  /** Closed connections of the service to targets that nats-server cut as slow consumers. */
  async function targetsCut(): Promise<number> {
    const closed = (await (await fetch(`http://127.0.0.1:${monitorPort}/connz?state=closed`)).json()) as {
      connections: Array<{ name?: string; reason?: string }>;
    };
    return closed.connections.filter(
      (c) => c.name === 'matrix-tool-registry-targets' && /slow consumer/i.test(c.reason ?? ''),
    ).length;
  }

  function call(name: string, i: number): Promise<ToolResult> {
    return attacker.request<ToolResult>(
      'system.dispatcher',
      '$call',
      { session: attackerSession, call: { id: `${name}-${i}`, name, arguments: {} } },
      { grant: attackerGrant, timeoutMs: 60_000 },
    );
  }

  /** Victim calls (3 s each, 8 in flight) until `running()` is false; the failures, as `<code>: <content>`. */
  async function victimLoad(running: () => boolean): Promise<{ calls: number; failures: string[] }> {
    const failures: string[] = [];
    let calls = 0;
    await Promise.all(
      Array.from({ length: 8 }, async (_, lane) => {
        for (let i = 0; running() || i === 0; i++) {
          const r = await victim.request<ToolResult>(
            'system.dispatcher',
            '$call',
            { session: victimSession, call: { id: `v${lane}-${i}`, name: 'spy_hold', arguments: {} } },
            { grant: victimGrant, timeoutMs: 60_000 },
          );
          calls++;
          if (r.isError) failures.push(`${r.error?.code}: ${r.content.slice(0, 200)}`);
        }
      }),
    );
    return { calls, failures };
  }

  beforeAll(async () => {
    monitorPort = await freePort();
    bus = await startSecuredBus({ mounts: ['bait'], natsArgs: ['-m', String(monitorPort)] });
    const operator = new BusClient(await bus.connect('operator'), { timeoutMs: 10_000 });
    await operator.request('system.tools', '$register', { spec: baitContext });
    await operator.request('system.tools', '$register', { spec: victimContext });
    operator.close();
    victimGrant = bus.grant({ principal: 'agent:victim', session: 'sess-victim', resolve: victimSession });
    attackerGrant = bus.grant({ principal: 'agent:bait', session: 'sess-bait', resolve: attackerSession });
    victim = new BusClient(await bus.connect('agent'), { timeoutMs: 60_000 });
    attacker = new BusClient(await bus.connect('agent2'), { timeoutMs: 60_000 });
    const spec = {
      servers: bus.server.url,
      user: 'bait',
      pass: 'bait-secret',
      mount: 'app.bait',
      bytes: BYTES,
      hold: HELD,
      holdMs: 5_000,
      delayMs: 200,
    };
    mount = await startMountProcess('bait-flooder.mjs', spec);
  }, 60_000);

  afterAll(async () => {
    mount?.stop();
    victim?.close();
    attacker?.close();
    await bus?.stop();
  });

  it("never cuts the connection to targets, nor fails another agent's call, when small replies turn into 200 of ~1 MB", async () => {
    for (let i = 0; i < BAITS; i++) expect((await call('bait_small', i)).isError).toBe(false);
    const slowBefore = await slowConsumers();
    const cutBefore = await targetsCut();
    let running = true;
    const load = victimLoad(() => running);
    // The victim's calls are in flight; then the held calls, answered at once with ~1 MB each.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const results = await Promise.all(Array.from({ length: HELD }, (_, i) => call('bait_burst', i)));
    running = false;
    const { calls, failures } = await load;
    const cut = (await targetsCut()) - cutBefore;
    const slow = (await slowConsumers()) - slowBefore;
    const attackerFailed = results.filter((r) => r.isError);
    console.log(
      `${HELD} calls answered with ${BYTES} bytes after ${BAITS} small replies: nats-server cut ${cut} connections to targets (${slow} slow consumers); ${attackerFailed.length} attacker calls failed${attackerFailed[0] ? `, first: ${attackerFailed[0].content.slice(0, 200)}` : ''}; ${failures.length} of ${calls} victim calls failed${failures[0] ? `, first: ${failures[0]}` : ''}`,
    );
    expect(cut).toBe(0);
    expect(failures).toEqual([]);
  }, 120_000);

  it("never cuts the connection to targets, nor fails another agent's call, under replies of ~1 MB of headers", async () => {
    const slowBefore = await slowConsumers();
    const cutBefore = await targetsCut();
    let running = true;
    const load = victimLoad(() => running);
    await new Promise((resolve) => setTimeout(resolve, 500));
    // 200 lanes, each calling again as soon as answered (5 bytes of body, ~1 MB of headers) for 8 s.
    let answered = 0;
    const stopAt = Date.now() + 8_000;
    await Promise.all(
      Array.from({ length: HELD }, async (_, lane) => {
        for (let i = 0; Date.now() < stopAt; i++) if (!(await call('bait_hdr', lane * 1000 + i)).isError) answered++;
      }),
    );
    running = false;
    const { calls, failures } = await load;
    const cut = (await targetsCut()) - cutBefore;
    const slow = (await slowConsumers()) - slowBefore;
    console.log(
      `${HELD} lanes answered with ${BYTES} bytes of headers: ${answered} answered; nats-server cut ${cut} connections to targets (${slow} slow consumers); ${failures.length} of ${calls} victim calls failed${failures[0] ? `, first: ${failures[0]}` : ''}`,
    );
    expect(cut).toBe(0);
    expect(failures).toEqual([]);
  }, 120_000);
});
