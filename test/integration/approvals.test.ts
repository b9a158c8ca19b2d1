/**
 * Approvals a person answers (PROTOCOL 8), on a real nats-server: a gated call waits as a
 * pending approval, is listed with its arguments, runs once when approved, never when
 * rejected or unanswered, and survives restarts of the service and of the approvals mount.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Asker } from '../../src/approvals/asker.js';
import { ApprovalStore } from '../../src/approvals/store.js';
import type { PendingApproval } from '../../src/approvals/types.js';
import type { CallEvent } from '../../src/audit/events.js';
import { watchCalls } from '../../src/audit/log.js';
import { connectBus } from '../../src/bus/connect.js';
import { contracts, SchemaId } from '../../src/bus/contracts.js';
import { newTraceparent, traceIdOf } from '../../src/bus/headers.js';
import type { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { tracesMount } from '../../src/reference-mounts/traces.js';
import {
  ApprovalsClient,
  type ApprovalsWorld,
  deployTarget,
  gatedDispatcher,
  gatedSession,
  startApprovals,
  startApprovalsWorld,
  uniqueApprovalsBucket,
} from '../harness/approvals.js';
import { sharedNats, testConnection, uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import type { Target } from '../harness/targets.js';

describe('a gated call that a person answers', () => {
  let world: ApprovalsWorld;
  let nc: NatsConnection;
  let target: Target;
  let dispatcher: Dispatcher;
  let person: ApprovalsClient;
  const app = uniqueMount('app');
  const bucket = uniqueApprovalsBucket();
  let ids = 0;
  const call = (args: Record<string, unknown>, id = `call-${ids++}`, ctx = {}) =>
    dispatcher.call(
      gatedSession,
      { id, name: 'deploy', arguments: args },
      { principal: 'agent:alpha', session: 's-1', ...ctx },
    );

  beforeAll(async () => {
    world = await startApprovalsWorld(app, bucket, {
      approvals: { policy: { default: 'ask' } },
      dispatcher: { approvalTimeoutMs: 20_000 },
    });
    ({ nc, target, dispatcher, person } = world);
  });
  afterAll(() => world.stop());

  it('waits as a pending approval, listed with its arguments, and runs once when approved', async () => {
    const running = call({ service: 'billing' }, 'deploy-1');
    const pending = await person.awaitPending('deploy-1');
    expect(pending).toMatchObject({
      tool: 'deploy',
      target: app,
      op: '$deploy',
      arguments: { service: 'billing' },
      principal: 'agent:alpha',
      session: 's-1',
    });
    expect(Date.parse(pending.expiresAt)).toBeGreaterThan(Date.parse(pending.requestedAt));
    expect(target.count('$deploy')).toBe(0);
    const answer = await person.answer(
      { approvalId: pending.approvalId, decision: 'approve' },
      { principal: 'user:ana' },
    );
    expect(answer).toMatchObject({ approvalId: pending.approvalId, decision: 'approve', by: 'user:ana' });
    const result = await running;
    expect(result).toMatchObject({ isError: false, structured: { deployed: 'billing' } });
    expect(target.count('$deploy')).toBe(1);
    expect((await person.pending()).approvals.some((a) => a.callId === 'deploy-1')).toBe(false);
  });

  it('is not made when rejected, and the model reads the person’s reason', async () => {
    const running = call({ service: 'ledger' }, 'deploy-2');
    const pending = await person.awaitPending('deploy-2');
    await person.answer(
      { approvalId: pending.approvalId, decision: 'reject', reason: 'not during the audit' },
      { principal: 'user:ana' },
    );
    const result = await running;
    expect(result).toMatchObject({ isError: true, error: { code: 'approval_denied' } });
    expect(result.content).toContain('rejected by user:ana: not during the audit');
    expect(target.count('$deploy')).toBe(1);
  });

  it('takes the first answer: a second one is a conflict and changes nothing', async () => {
    const running = call({ service: 'mail' }, 'deploy-3');
    const pending = await person.awaitPending('deploy-3');
    await person.answer(
      { approvalId: pending.approvalId, decision: 'reject', reason: 'no' },
      { principal: 'user:ana' },
    );
    await expect(
      person.answer({ approvalId: pending.approvalId, decision: 'approve' }, { principal: 'user:bob' }),
    ).rejects.toMatchObject({ code: 'conflict', message: expect.stringContaining('already rejected by user:ana') });
    expect((await running).error?.code).toBe('approval_denied');
    expect(target.count('$deploy')).toBe(1);
  });

  it('shows one approval by id while it waits; once answered, a conflict saying who answered', async () => {
    const running = call({ service: 'search' }, 'deploy-one');
    const pending = await person.awaitPending('deploy-one');
    const one = await person.pending({ principal: 'user:ana' }, { approvalId: pending.approvalId });
    expect(one.approvals).toEqual([pending]);
    await person.answer(
      { approvalId: pending.approvalId, decision: 'reject', reason: 'not now' },
      { principal: 'user:ana' },
    );
    await expect(person.pending({}, { approvalId: pending.approvalId })).rejects.toMatchObject({
      code: 'conflict',
      message: expect.stringContaining('already rejected by user:ana'),
    });
    await expect(person.pending({}, { approvalId: 'abcdefabcdefabcdef00-000000000000' })).rejects.toMatchObject({
      code: 'not_found',
    });
    expect((await running).error?.code).toBe('approval_denied');
  });

  it('hides an approval by id from the principal whose call it is, as if unknown', async () => {
    const running = call({ service: 'own' }, 'deploy-own');
    const pending = await person.awaitPending('deploy-own');
    await expect(
      person.pending({ principal: 'agent:alpha' }, { approvalId: pending.approvalId }),
    ).rejects.toMatchObject({ code: 'not_found' });
    await person.answer(
      { approvalId: pending.approvalId, decision: 'reject', reason: 'no' },
      { principal: 'user:ana' },
    );
    await running;
  });

  it('answers an unknown approval id not_found', async () => {
    await expect(
      person.answer({ approvalId: 'abcdefabcdefabcdef00-000000000000', decision: 'approve' }),
    ).rejects.toMatchObject({
      code: 'not_found',
    });
  });

  it('never counts an answer that is not exactly approve or reject, and names the field', async () => {
    const running = call({ service: 'search' }, 'deploy-4', { deadline: Date.now() + 3_000 });
    const pending = await person.awaitPending('deploy-4');
    for (const decision of ['yes', 'APPROVE', 'approve ', true, 1, null]) {
      await expect(person.answer({ approvalId: pending.approvalId, decision })).rejects.toMatchObject({
        code: 'bad_request',
        details: { violations: expect.arrayContaining([expect.objectContaining({ path: '/decision' })]) },
      });
    }
    await expect(person.answer({ decision: 'approve' })).rejects.toMatchObject({
      code: 'bad_request',
      message: expect.stringContaining('approvalId'),
    });
    // Nothing approved it: the call runs out of time, refused, and the target never hears of it.
    expect((await running).error?.code).toBe('approval_denied');
    expect(target.count('$deploy')).toBe(1);
  });

  it('refuses a call nobody answered by its deadline, and the pending approval is gone', async () => {
    const started = Date.now();
    const result = await call({ service: 'cache' }, 'deploy-5', { deadline: Date.now() + 1_500 });
    expect(result).toMatchObject({ isError: true, error: { code: 'approval_denied' } });
    expect(result.content).toContain('nobody answered');
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_400);
    const listed = await person.pending();
    expect(listed.approvals.some((a) => a.callId === 'deploy-5')).toBe(false);
    expect(target.count('$deploy')).toBe(1);
  });

  it('expires an approval at the policy’s askTimeoutMs even with the caller willing to wait longer', async () => {
    const short = uniqueApprovalsBucket();
    const other = await startApprovals(nc, short, { policy: { default: 'ask', askTimeoutMs: 1_000 } });
    await world.approvals.stop(); // only the short-lived policy answers now
    try {
      const shortDispatcher = gatedDispatcher(nc, app, { approvalsBucket: short });
      const result = await shortDispatcher.call(
        gatedSession,
        { id: 'deploy-6', name: 'deploy', arguments: { service: 'x' } },
        { principal: 'agent:alpha', deadline: Date.now() + 15_000 },
      );
      shortDispatcher.close();
      expect(result.error?.code).toBe('approval_denied');
      // Ended at the policy's 1 s, not at the caller's 15 s deadline (what it says then depends on
      // which of the expiry and its watch came first).
      expect(result.durationMs).toBeLessThan(10_000);
    } finally {
      await other.stop();
      world.approvals = await startApprovals(nc, bucket, { policy: { default: 'ask' } });
    }
  });

  it('lets a re-sent call (same id) wait on the same approval, and runs it once', async () => {
    const first = call({ service: 'dns' }, 'deploy-7', { deadline: Date.now() + 1_000 });
    const pending = await person.awaitPending('deploy-7');
    // The same call again while the first still waits: the same approval, not a second one.
    const again = call({ service: 'dns' }, 'deploy-7', { deadline: Date.now() + 10_000 });
    await eventually(async () => {
      const listed = (await person.pending()).approvals.filter((a) => a.callId === 'deploy-7');
      expect(listed.map((a) => a.approvalId)).toEqual([pending.approvalId]);
    });
    await person.answer({ approvalId: pending.approvalId, decision: 'approve' }, { principal: 'user:ana' });
    const results = await Promise.all([first, again]);
    expect(results.filter((r) => !r.isError)).toHaveLength(1);
    expect(target.count('$deploy')).toBe(2);
  });

  it('does not let a call with the same id but other arguments ride on a pending approval', async () => {
    const running = call({ service: 'one' }, 'deploy-8', { deadline: Date.now() + 5_000 });
    const pending = await person.awaitPending('deploy-8');
    const other = await call({ service: 'two' }, 'deploy-8', { deadline: Date.now() + 5_000 });
    expect(other).toMatchObject({ isError: true, error: { code: 'approval_denied' } });
    expect(other.content).toContain('other arguments');
    await person.answer({ approvalId: pending.approvalId, decision: 'approve' }, { principal: 'user:ana' });
    expect((await running).structured).toEqual({ deployed: 'one' });
    expect(target.seen.filter((s) => (s.args as { service?: string }).service === 'two')).toHaveLength(0);
  });

  it('audits who answered and how long the call waited, and trace_query shows it', async () => {
    const traces = tracesMount(nc);
    await traces.mount.start();
    const audited = gatedDispatcher(nc, app, { approvalsBucket: bucket, audit: true });
    const events: CallEvent[] = [];
    const stop = watchCalls(nc, (e) => events.push(e));
    try {
      const traceparent = newTraceparent();
      const running = audited.call(
        gatedSession,
        { id: 'audit-1', name: 'deploy', arguments: { service: 'a' } },
        {
          principal: 'agent:alpha',
          traceparent,
        },
      );
      const pending = await person.awaitPending('audit-1');
      await person.answer({ approvalId: pending.approvalId, decision: 'approve' }, { principal: 'user:ana' });
      await running;
      const rejecting = audited.call(
        gatedSession,
        { id: 'audit-2', name: 'deploy', arguments: { service: 'b' } },
        {
          principal: 'agent:alpha',
        },
      );
      const second = await person.awaitPending('audit-2');
      await person.answer(
        { approvalId: second.approvalId, decision: 'reject', reason: 'no' },
        { principal: 'user:bob' },
      );
      await rejecting;
      audited.close();
      await eventually(() =>
        expect(events.map((e) => e.callId)).toEqual(expect.arrayContaining(['audit-1', 'audit-2'])),
      );
      const approved = events.find((e) => e.callId === 'audit-1');
      expect(approved).toMatchObject({ approvalId: pending.approvalId, approvedBy: 'user:ana', outcome: 'ok' });
      expect(approved?.approvalWaitMs).toBeGreaterThanOrEqual(0);
      expect(approved?.rejectedBy).toBeUndefined();
      expect(events.find((e) => e.callId === 'audit-2')).toMatchObject({
        approvalId: second.approvalId,
        rejectedBy: 'user:bob',
        code: 'approval_denied',
      });
      for (const e of events) expect(contracts().check(SchemaId.CallEvents)([e])).toBeUndefined();
      const traced = await person.client.request<{ events: CallEvent[] }>('system.traces', '$query', {
        traceId: traceIdOf(traceparent),
      });
      expect(traced.events[0]).toMatchObject({
        callId: 'audit-1',
        approvedBy: 'user:ana',
        approvalId: pending.approvalId,
      });
    } finally {
      stop();
      await traces.mount.stop();
      traces.stop();
    }
  });

  it('refuses a principal that answers its own call', async () => {
    const running = call({ service: 'self' }, 'deploy-9', { deadline: Date.now() + 3_000 });
    const pending = await person.awaitPending('deploy-9');
    await expect(
      person.answer({ approvalId: pending.approvalId, decision: 'approve' }, { principal: 'agent:alpha' }),
    ).rejects.toMatchObject({ code: 'forbidden' });
    expect((await running).error?.code).toBe('approval_denied');
  });
});

describe('the terminal asker, one more way to answer', () => {
  let nc: NatsConnection;
  let target: Target;
  let person: ApprovalsClient;
  const app = uniqueMount('app');

  beforeAll(async () => {
    nc = await testConnection();
    target = await deployTarget(nc, app);
    person = new ApprovalsClient(nc);
  });
  afterAll(() => {
    person.close();
    target.stop();
  });

  it('answers a pending approval as terminal, and the call runs once', async () => {
    const bucket = uniqueApprovalsBucket();
    const asked: PendingApproval[] = [];
    const asker: Asker = {
      ask: async (approval) => {
        asked.push(approval);
        return { decision: 'approve' };
      },
    };
    const mount = await startApprovals(nc, bucket, { asker });
    const dispatcher = gatedDispatcher(nc, app, { approvalsBucket: bucket, audit: false });
    try {
      const result = await dispatcher.call(
        gatedSession,
        { id: 'tty-1', name: 'deploy', arguments: { service: 't' } },
        {
          deadline: Date.now() + 10_000,
        },
      );
      expect(result).toMatchObject({ isError: false, structured: { deployed: 't' } });
      expect(asked.map((a) => a.callId)).toEqual(['tty-1']);
      expect(target.count('$deploy')).toBe(1);
    } finally {
      dispatcher.close();
      await mount.stop();
    }
  });

  it('withdraws its question when someone else answers first, and that answer counts', async () => {
    const bucket = uniqueApprovalsBucket();
    let withdrawn: AbortSignal | undefined;
    const asker: Asker = {
      ask: (_approval, signal) => {
        withdrawn = signal;
        return new Promise((resolve) => signal.addEventListener('abort', () => resolve({ decision: 'approve' })));
      },
    };
    const mount = await startApprovals(nc, bucket, { asker });
    const dispatcher = gatedDispatcher(nc, app, { approvalsBucket: bucket, audit: false });
    try {
      const running = dispatcher.call(
        gatedSession,
        { id: 'tty-2', name: 'deploy', arguments: { service: 'u' } },
        {
          deadline: Date.now() + 10_000,
        },
      );
      const pending = await person.awaitPending('tty-2');
      await person.answer(
        { approvalId: pending.approvalId, decision: 'reject', reason: 'first' },
        { principal: 'user:ana' },
      );
      await eventually(() => expect(withdrawn?.aborted).toBe(true));
      const result = await running;
      expect(result.content).toContain('rejected by user:ana: first');
      expect(target.count('$deploy')).toBe(1);
    } finally {
      dispatcher.close();
      await mount.stop();
    }
  });
});

describe('pending approvals across restarts and instances', () => {
  let nc: NatsConnection;
  let target: Target;
  let person: ApprovalsClient;
  const app = uniqueMount('app');
  const bucket = uniqueApprovalsBucket();

  beforeAll(async () => {
    nc = await testConnection();
    target = await deployTarget(nc, app);
    person = new ApprovalsClient(nc);
  });
  afterAll(() => {
    person.close();
    target.stop();
  });

  /** A service process: its own connection, the dispatcher and the approvals mount; `crash` drops it unanswered. */
  const startService = async () => {
    const own = await connectBus({ ...sharedNats(), name: 'approvals-service' });
    const mount = await startApprovals(own, bucket);
    const dispatcher = gatedDispatcher(own, app, { approvalsBucket: bucket });
    return {
      mount,
      dispatcher,
      call: (id: string, deadline: number): Promise<ToolResult> =>
        dispatcher.call(
          gatedSession,
          { id, name: 'deploy', arguments: { service: 'api' } },
          {
            principal: 'agent:alpha',
            session: 's-r',
            deadline,
          },
        ),
      crash: async () => {
        dispatcher.close();
        await own.close();
      },
      stop: async () => {
        dispatcher.stopWaiting();
        await mount.stop();
        dispatcher.close();
        await own.drain();
      },
    };
  };

  it('keeps the approval over a restart of the service between the call and the answer', async () => {
    const deadline = Date.now() + 30_000;
    const first = await startService();
    void first.call('restart-1', deadline);
    const pending = await person.awaitPending('restart-1');
    await first.crash();
    const second = await startService();
    try {
      // The answer reaches the new instance; the caller, its deadline still ahead, sends the call again.
      await person.answer({ approvalId: pending.approvalId, decision: 'approve' }, { principal: 'user:ana' });
      const result = await second.call('restart-1', deadline);
      expect(result).toMatchObject({ isError: false, structured: { deployed: 'api' } });
      expect(target.count('$deploy')).toBe(1);
      // Used once: sending it yet again asks anew, and nothing runs without a new answer.
      const third = await second.call('restart-1', Date.now() + 1_000);
      expect(third.error?.code).toBe('approval_denied');
      expect(target.count('$deploy')).toBe(1);
    } finally {
      await second.stop();
    }
  });

  it('keeps a call that was re-sent before the answer waiting on the same approval', async () => {
    const deadline = Date.now() + 30_000;
    const first = await startService();
    void first.call('restart-2', deadline);
    const pending = await person.awaitPending('restart-2');
    await first.stop(); // a graceful stop: the waiting call is refused, its approval stays pending
    const second = await startService();
    try {
      const resent = second.call('restart-2', deadline);
      await eventually(async () => {
        expect((await person.pending()).approvals.map((a) => a.approvalId)).toContain(pending.approvalId);
      });
      await person.answer({ approvalId: pending.approvalId, decision: 'approve' }, { principal: 'user:ana' });
      expect(await resent).toMatchObject({ isError: false, structured: { deployed: 'api' } });
      expect(target.count('$deploy')).toBe(2);
    } finally {
      await second.stop();
    }
  });

  it('lets another instance of system.approvals answer, and the waiting call hears it', async () => {
    const service = await startService();
    const other = await connectBus({ ...sharedNats(), name: 'approvals-other' });
    const otherMount = await startApprovals(other, bucket);
    try {
      const running = service.call('two-1', Date.now() + 30_000);
      const pending = await person.awaitPending('two-1');
      await service.mount.stop(); // only the other instance answers $pending and $answer now
      await eventually(async () => {
        expect((await person.pending()).approvals.map((a) => a.approvalId)).toContain(pending.approvalId);
      });
      await person.answer({ approvalId: pending.approvalId, decision: 'approve' }, { principal: 'user:ana' });
      expect(await running).toMatchObject({ isError: false });
      expect(target.count('$deploy')).toBe(3);
    } finally {
      await otherMount.stop();
      await other.drain();
      service.dispatcher.close();
      await service.stop().catch(() => {});
    }
  });

  it('sweeps approvals past their expiresAt out of the bucket, nobody waiting for them', async () => {
    const service = await startService();
    try {
      // Asked, and then nobody waits (the asking process died): only the sweeper removes it.
      const asked = await person.client.request<{ decision: string; approvalId: string }>(
        'system.approvals',
        '$decide',
        {
          callId: 'sweep-1',
          tool: 'deploy',
          target: app,
          op: '$deploy',
          arguments: {},
          deadline: Date.now() + 500,
        },
      );
      expect(asked.decision).toBe('pending');
      const store = await ApprovalStore.bind(nc, bucket);
      expect(await store.get(asked.approvalId)).toBeDefined();
      await eventually(async () => expect(await store.get(asked.approvalId)).toBeUndefined());
    } finally {
      await service.stop();
    }
  });
});
