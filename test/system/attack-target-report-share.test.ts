/**
 * Attack (issue 41, docs/target-traffic.md: "All of a target's reports together are bounded too:
 * 5000 at once and 2000 a second ... Past it every request to that target in flight fails with
 * TargetFloodError", and "The failure blames the target"). The per-target bucket
 * (src/bus/reports.ts:127-169, tripped in src/bus/client.ts:399-402 `stopTarget`) counts what a
 * target's requests receive, and how many requests a target has is chosen by its *callers*: one
 * principal may keep 256 calls in flight to a target (TargetSlots), each asking for progress, and a
 * target that honestly reports 20 times a second per call (the MCP host's own thinning,
 * src/mcp/host/calls.ts PROGRESS_EVERY_MS) then sends 5,000 a second. After ~2 s every request to
 * that target in flight fails, another agent's call that asked for no progress at all among them,
 * and the message blames the target, which did nothing wrong. So a caller, not a target, makes a
 * mount's calls fail for everyone (and the mount look like a flooder in the audit trail).
 * What should hold: a target that reports within what one request may send (20 a second, a fifth
 * of the 100 a request takes) is never stopped as a flooder, and another agent's call to it
 * answers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { type SecuredBus, startSecuredBus } from '../harness/identity.js';
import { type MountProcess, startMountProcess } from '../harness/mount-process.js';

/** The attacker's calls in flight, each asking for progress: under one principal's 256. */
const CALLS = 240;
/** How long each `$work` call runs, reporting every 50 ms when asked, in ms. */
const WORK_MS = 4_000;

const repContext = {
  key: 'rep-tools',
  title: 'Reporting',
  description: 'tools on an honest mount that reports progress',
  matrixTools: [
    { name: 'rep_work', description: 'works a while', inputSchema: { type: 'object' }, target: 'app.rep', op: '$work' },
    {
      name: 'rep_quick',
      description: 'answers at once',
      inputSchema: { type: 'object' },
      target: 'app.rep',
      op: '$quick',
    },
  ],
  permissions: { approval: 'never' },
};
const session = { profile: 'default', toolContextRefs: ['rep-tools'] };

describe("an honest mount's progress, multiplied by one caller's calls", () => {
  let bus: SecuredBus;
  let victim: BusClient;
  let attacker: BusClient;
  let victimGrant: string;
  let attackerGrant: string;
  let mount: MountProcess | undefined;

  beforeAll(async () => {
    bus = await startSecuredBus({ mounts: ['rep'] });
    const operator = new BusClient(await bus.connect('operator'), { timeoutMs: 10_000 });
    await operator.request('system.tools', '$register', { spec: repContext });
    operator.close();
    victimGrant = bus.grant({ principal: 'agent:victim', session: 'sess-victim', resolve: session });
    attackerGrant = bus.grant({ principal: 'agent:many', session: 'sess-many', resolve: session });
    victim = new BusClient(await bus.connect('agent'), { timeoutMs: 60_000 });
    attacker = new BusClient(await bus.connect('agent2'), { timeoutMs: 60_000 });
    const spec = { servers: bus.server.url, user: 'rep', pass: 'rep-secret', mount: 'app.rep', workMs: WORK_MS };
    mount = await startMountProcess('reporting-mount.mjs', spec);
  }, 60_000);

  afterAll(async () => {
    mount?.stop();
    victim?.close();
    attacker?.close();
    await bus?.stop();
  });

  it("answers another agent's call to a mount reporting 20 a second on each of 240 calls of one principal", async () => {
    // The mount answers small: its replies are then taken to be small (else 4 calls of a
    // principal, at max_payload each, would be all the reply budget lets in flight).
    for (let i = 0; i < 16; i++) {
      const r = await attacker.request<ToolResult>(
        'system.dispatcher',
        '$call',
        { session, call: { id: `q${i}`, name: 'rep_quick', arguments: {} } },
        { grant: attackerGrant },
      );
      expect(r.isError).toBe(false);
    }
    let reports = 0;
    const calls = Array.from({ length: CALLS }, (_, i) =>
      attacker.request<ToolResult>(
        'system.dispatcher',
        '$call',
        { session, call: { id: `a${i}`, name: 'rep_work', arguments: {} } },
        { grant: attackerGrant, onProgress: () => reports++ },
      ),
    );
    // The victim's call, asking no progress, in flight beside them.
    const mine = await victim.request<ToolResult>(
      'system.dispatcher',
      '$call',
      { session, call: { id: 'v', name: 'rep_work', arguments: {} } },
      { grant: victimGrant },
    );
    const results = await Promise.all(calls);
    const stopped = results.filter((r) => r.isError);
    console.log(
      `${CALLS} calls reporting 20/s each: ${reports} reports relayed; ${stopped.length} of them failed${stopped[0] ? `, first: ${stopped[0].content.slice(0, 300)}` : ''}; the victim's call: ${mine.isError ? mine.content.slice(0, 300) : 'answered'}`,
    );
    expect(mine.isError, mine.content).toBe(false);
    expect(stopped).toEqual([]);
  }, 120_000);
});
