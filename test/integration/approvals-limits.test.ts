/**
 * Live approvals are bounded per principal and per session (PROTOCOL 8), on a real
 * nats-server: one principal that asks for more than its share is refused on its own calls,
 * with a reason naming the bound, while another principal's gated call still waits for a
 * person and runs once approved. The whole bucket keeps its own bound as a backstop.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApprovalDecision } from '../../src/approvals/types.js';
import { BusClient } from '../../src/bus/client.js';
import type { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import {
  type ApprovalsClient,
  type ApprovalsWorld,
  gatedSession,
  startApprovalsWorld,
  uniqueApprovalsBucket,
} from '../harness/approvals.js';
import { uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import type { Target } from '../harness/targets.js';

describe('live approvals bounded per principal and per session', () => {
  let world: ApprovalsWorld;
  let target: Target;
  let dispatcher: Dispatcher;
  let person: ApprovalsClient;
  let bus: BusClient;
  const app = uniqueMount('app');
  const bucket = uniqueApprovalsBucket();
  /** What `$decide` answers a gated `deploy` of `principal` in `session`, as the dispatcher asks it. */
  const decide = (principal: string, session: string, callId: string) =>
    bus.request<ApprovalDecision>('system.approvals', '$decide', {
      callId,
      tool: 'deploy',
      target: app,
      op: '$deploy',
      arguments: { service: callId },
      principal,
      session,
    });

  beforeAll(async () => {
    world = await startApprovalsWorld(app, bucket, {
      approvals: {
        policy: { default: 'ask', maxPendingPerPrincipal: 5, maxPendingPerSession: 3 },
        limits: { total: 17 },
      },
      dispatcher: { approvalTimeoutMs: 20_000 },
    });
    ({ target, dispatcher, person } = world);
    bus = new BusClient(world.nc, { timeoutMs: 5_000 });
  });
  afterAll(async () => {
    bus.close();
    await world.stop();
  });

  it('holds the bound against calls that arrive together, before the watch hears any of them', async () => {
    const burst = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        bus.request<ApprovalDecision>('system.approvals', '$decide', {
          callId: `burst-${i}`,
          tool: 'deploy',
          target: app,
          op: '$deploy',
          arguments: { i },
          principal: 'agent:burst',
          session: `burst-${i % 20}`,
        }),
      ),
    );
    expect(burst.filter((d) => d.decision === 'pending')).toHaveLength(5);
    expect(burst.filter((d) => d.decision === 'reject')).toHaveLength(35);
  });

  it('refuses one principal past its bound, naming it, while another principal’s call waits and runs', async () => {
    // agent:flood fills its own share over two sessions (3 + 2), then asks more.
    for (let i = 0; i < 5; i++)
      expect(await decide('agent:flood', `flood-${i < 3 ? 'a' : 'b'}`, `flood-${i}`)).toMatchObject({
        decision: 'pending',
      });
    await eventually(async () =>
      expect((await person.pending()).approvals.filter((a) => a.principal === 'agent:flood')).toHaveLength(5),
    );
    const refused = await decide('agent:flood', 'flood-c', 'flood-5');
    expect(refused).toMatchObject({ decision: 'reject', by: 'policy' });
    expect((refused as { reason: string }).reason).toContain(
      'agent:flood has 5 approvals pending already (at most 5 per principal)',
    );
    // A resend of a call already waiting is not a new approval: it still gets its own.
    expect(await decide('agent:flood', 'flood-a', 'flood-0')).toMatchObject({ decision: 'pending' });

    const running = dispatcher.call(
      gatedSession,
      { id: 'beta-1', name: 'deploy', arguments: { service: 'billing' } },
      { principal: 'agent:beta', session: 'beta-s' },
    );
    const pending = await person.awaitPending('beta-1');
    expect(pending).toMatchObject({ principal: 'agent:beta', arguments: { service: 'billing' } });
    await person.answer({ approvalId: pending.approvalId, decision: 'approve' }, { principal: 'user:ana' });
    expect(await running).toMatchObject({ isError: false, structured: { deployed: 'billing' } });
    expect(target.count('$deploy')).toBe(1);
  });

  it('refuses one session past its bound while the same principal’s other session still asks', async () => {
    for (let i = 0; i < 3; i++)
      expect(await decide('agent:gamma', 'gamma-a', `gamma-${i}`)).toMatchObject({ decision: 'pending' });
    await eventually(async () =>
      expect((await person.pending()).approvals.filter((a) => a.principal === 'agent:gamma')).toHaveLength(3),
    );
    const refused = await decide('agent:gamma', 'gamma-a', 'gamma-3');
    expect((refused as { reason: string }).reason).toContain(
      'session gamma-a has 3 approvals pending already (at most 3 per session)',
    );
    expect(await decide('agent:gamma', 'gamma-b', 'gamma-4')).toMatchObject({ decision: 'pending' });
  });

  it('keeps the bound of the whole bucket as a backstop', async () => {
    // 5 of agent:burst, 5 of agent:flood and 4 of agent:gamma live; 3 more fill the bucket's 17.
    for (const who of ['agent:d', 'agent:e', 'agent:f'])
      expect(await decide(who, `${who}-s`, `${who}-1`)).toMatchObject({ decision: 'pending' });
    await eventually(async () => expect((await person.pending()).approvals).toHaveLength(17));
    const refused = await decide('agent:g', 'g-s', 'g-1');
    expect((refused as { reason: string }).reason).toContain('17 approvals are pending already (at most 17 in all)');
  });
});
