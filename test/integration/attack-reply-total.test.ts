/**
 * Attack (issue 41, docs/target-traffic.md: "A call to a target waits for a place while (calls in
 * flight + 1) × the size its replies are taken to be exceeds 16 MiB (one principal: a quarter,
 * 4 MiB), or the calls in flight of all targets together would reserve more than 48 MiB"). The
 * 48 MiB of all targets has no share per principal (src/dispatcher/reply-budget.ts:175): a call to
 * a target nothing is known of reserves max_payload (1 MiB) for as long as it is in flight, so one
 * principal calling 12 mounts that never answer, 4 calls each (its share of each), reserves all
 * 48 MiB and sends nothing. Every other principal is then held to one call in flight per target,
 * an honest one included: its calls run one after another, and those that wait past their
 * deadline are refused ("replies in flight"): four calls of 1 s with a deadline of 2.5 s, which all
 * answer side by side in ~1 s, lose two. The real dispatcher on a real nats-server; the silent mounts could be one MCP host's
 * servers (each `mcp.<name>` a target).
 * What should hold: another principal's four calls at once to an honest target all answer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { testConnection, uniqueMount } from '../harness/bus.js';
import { staticRegistry } from '../harness/registry.js';
import { startTarget, type Target } from '../harness/targets.js';

const SILENT = Array.from({ length: 12 }, () => uniqueMount('silent'));
const HONEST = uniqueMount('honest');
/** How long the honest target takes to answer, in ms. */
const HONEST_MS = 1_000;
const tool = (name: string, target: string, op: string) => ({
  name,
  description: name,
  inputSchema: { type: 'object' as const },
  target,
  op,
});
const context = {
  key: 'attack-reply-total',
  title: 'Total',
  description: 'silent mounts and an honest one',
  matrixTools: [...SILENT.map((target, i) => tool(`silent_${i}`, target, '$wait')), tool('honest', HONEST, '$run')],
  permissions: { approval: 'never' as const },
};
const session = { profile: 'default', toolContextRefs: ['attack-reply-total'] };

describe('one principal holding the reply budget of all targets', () => {
  let nc: Awaited<ReturnType<typeof testConnection>>;
  let registry: { stop(): Promise<void> };
  let dispatcher: Dispatcher;
  const targets: Target[] = [];

  beforeAll(async () => {
    nc = await testConnection();
    registry = await staticRegistry(nc, context);
    // Never answers: the call waits for its deadline, its place reserved meanwhile.
    for (const name of SILENT) targets.push(await startTarget(nc, name, { $wait: () => new Promise(() => {}) }));
    targets.push(
      await startTarget(nc, HONEST, {
        $run: () => new Promise((resolve) => setTimeout(() => resolve({ ok: true }), HONEST_MS)),
      }),
    );
    dispatcher = new Dispatcher(nc);
  });
  afterAll(async () => {
    for (const t of targets) t.stop();
    dispatcher?.close();
    await registry?.stop();
  });

  it("answers another principal's four calls at once to an honest target", async () => {
    const victim = { principal: 'agent:victim', session: 's-victim' };
    // The honest target's replies are small: it is soon taken to answer small.
    for (let i = 0; i < 12; i++) {
      const r = await dispatcher.call(session, { id: `w${i}`, name: 'honest', arguments: {} }, victim);
      expect(r.isError, r.content).toBe(false);
    }
    const attack = { principal: 'agent:silent', session: 's-silent', deadline: Date.now() + 6_000 };
    const held = SILENT.flatMap((_, m) =>
      Array.from({ length: 4 }, (_, i) =>
        dispatcher.call(session, { id: `a${m}-${i}`, name: `silent_${m}`, arguments: {} }, attack),
      ),
    );
    // Let the 48 calls reach their targets.
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Four calls at once, each 1 s: all answer in ~1 s when they run side by side.
    const deadline = Date.now() + 2.5 * HONEST_MS;
    const mine: ToolResult[] = await Promise.all(
      [0, 1, 2, 3].map((i) =>
        dispatcher.call(session, { id: `v${i}`, name: 'honest', arguments: {} }, { ...victim, deadline }),
      ),
    );
    const attacked = await Promise.all(held);
    console.log(
      `48 silent calls of one principal: ${attacked.filter((r) => r.isError).length} ended in error; the victim's four calls: ${mine.map((r) => (r.isError ? r.content.slice(0, 200) : 'answered')).join(' | ')}`,
    );
    for (const r of mine) expect(r.isError, r.content).toBe(false);
  }, 30_000);
});
