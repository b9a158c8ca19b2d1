/**
 * Attack (issue 41, "Results": the cost of reading a reply). Replies are decoded whole, with no
 * bound on their shape (src/bus/read-reply.ts:31 → decodeReply, src/bus/codec.ts:121), where a
 * request's shape is judged from its bytes before any work (decodeMap, REQUEST_SHAPE). A mount
 * answering each call with 1 MB of MessagePack nested one byte a level (1 M arrays deep) costs the
 * service ~0.5–0.8 s of its event loop per reply (test/unit/attack-reply-shape-cost.test.ts),
 * before the dispatcher refuses it (JSON.stringify overflows the stack: `unshowableReply`). The
 * reply budget lets one principal keep 4 such calls in flight (its quarter of 16 MiB at ~1 MiB a
 * reply), so one agent with one hostile mount keeps the loop that serves every other agent's calls
 * busy. What should hold: another agent's calls keep their pace (p50 within a multiple of idle in
 * the same run, as test/system/target-flood.test.ts asks of a flood of small reports).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { type SecuredBus, spySession, startSecuredBus } from '../harness/identity.js';
import { type MountProcess, startMountProcess } from '../harness/mount-process.js';

/** Bytes of each deep reply: within max_payload. */
const BYTES = 1_000_000;
/** The attacker's calls in flight: one principal's share of the reply budget at ~1 MiB a reply. */
const LANES = 4;
/** How long the attack lasts, and the idle measure, in ms. */
const MEASURE_MS = 6_000;
/** The multiple of idle p50 the victim's p50 may reach under the attack. */
const SLOWDOWN = 20;

const deepContext = {
  key: 'deep-tools',
  title: 'Deep',
  description: 'a tool on a mount that answers deeply nested replies',
  matrixTools: [
    { name: 'deep_reply', description: 'deep', inputSchema: { type: 'object' }, target: 'app.deep', op: '$deep' },
  ],
  permissions: { approval: 'never' },
};
const attackerSession = { profile: 'default', toolContextRefs: ['deep-tools'] };

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;
}

describe('a mount answering replies built to be expensive to read', () => {
  let bus: SecuredBus;
  let victim: BusClient;
  let attacker: BusClient;
  let victimGrant: string;
  let attackerGrant: string;
  let mount: MountProcess | undefined;

  /** Milliseconds of victim calls (spy_run) for `ms`. */
  async function victimTimes(ms: number): Promise<number[]> {
    const times: number[] = [];
    const until = performance.now() + ms;
    while (performance.now() < until) {
      const started = performance.now();
      const r = await victim.request<ToolResult>(
        'system.dispatcher',
        '$call',
        { session: spySession, call: { id: 'v', name: 'spy_run', arguments: {} } },
        { grant: victimGrant },
      );
      expect(r.isError, r.content).toBe(false);
      times.push(performance.now() - started);
    }
    return times;
  }

  beforeAll(async () => {
    bus = await startSecuredBus({ mounts: ['deep'] });
    const operator = new BusClient(await bus.connect('operator'), { timeoutMs: 10_000 });
    await operator.request('system.tools', '$register', { spec: deepContext });
    operator.close();
    victimGrant = bus.grant({ principal: 'agent:victim', session: 'sess-victim', resolve: spySession });
    attackerGrant = bus.grant({ principal: 'agent:deep', session: 'sess-deep', resolve: attackerSession });
    victim = new BusClient(await bus.connect('agent'), { timeoutMs: 60_000 });
    attacker = new BusClient(await bus.connect('agent2'), { timeoutMs: 60_000 });
    const spec = {
      servers: bus.server.url,
      user: 'deep',
      pass: 'deep-secret',
      mount: 'app.deep',
      bytes: BYTES,
      delayMs: 0,
    };
    mount = await startMountProcess('bait-flooder.mjs', spec);
  }, 60_000);

  afterAll(async () => {
    mount?.stop();
    victim?.close();
    attacker?.close();
    await bus?.stop();
  });

  it("keeps another agent's calls at their pace while one agent gets replies of 1 MB nested a million deep", async () => {
    await victimTimes(1_000); // warm up
    const idle = await victimTimes(MEASURE_MS);
    let running = true;
    let answered = 0;
    let first = '';
    const lanes = Array.from({ length: LANES }, async (_, lane) => {
      for (let i = 0; running; i++) {
        const r = await attacker.request<ToolResult>(
          'system.dispatcher',
          '$call',
          { session: attackerSession, call: { id: `d${lane}-${i}`, name: 'deep_reply', arguments: {} } },
          { grant: attackerGrant },
        );
        answered++;
        first ||= r.content.slice(0, 200);
      }
    });
    const under = await victimTimes(MEASURE_MS);
    running = false;
    await Promise.all(lanes);
    const p50 = quantile(under, 0.5);
    const idleP50 = quantile(idle, 0.5);
    console.log(
      `${LANES} lanes of ${BYTES}-byte deep replies: ${answered} answered (first: ${first}); victim p50 ${p50.toFixed(1)} ms, p99 ${quantile(under, 0.99).toFixed(1)} ms over ${under.length} calls; idle p50 ${idleP50.toFixed(1)} ms, p99 ${quantile(idle, 0.99).toFixed(1)} ms over ${idle.length}`,
    );
    expect(p50).toBeLessThan(SLOWDOWN * Math.max(idleP50, 2));
  }, 120_000);
});
