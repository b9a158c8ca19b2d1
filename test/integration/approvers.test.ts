/**
 * Who may answer an approval (PROTOCOL 8), where the service trusts issuers: only a grant
 * whose `nats.approve` covers the call, never for its own call, and `by` is the grant's `sub`.
 */

import type { NatsConnection } from '@nats-io/nats-core';
import { createAccount } from '@nats-io/nkeys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalStore } from '../../src/approvals/store.js';
import type { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { IdentityGate } from '../../src/identity/gate.js';
import { type GrantSpec, mintGrant } from '../../src/identity/mint.js';
import {
  type ApprovalsClient,
  type ApprovalsWorld,
  gatedSession,
  startApprovalsWorld,
  uniqueApprovalsBucket,
} from '../harness/approvals.js';
import { uniqueMount } from '../harness/bus.js';
import type { Target } from '../harness/targets.js';

describe('approver grants', () => {
  let world: ApprovalsWorld;
  let nc: NatsConnection;
  let target: Target;
  let dispatcher: Dispatcher;
  let person: ApprovalsClient;
  const issuer = createAccount();
  const app = uniqueMount('app');
  const bucket = uniqueApprovalsBucket();
  const grant = (principal: string, approve?: GrantSpec['approve'], signer = issuer) =>
    mintGrant(signer, {
      principal,
      session: `approve-${principal}`,
      resolve: { profile: 'default' },
      ttlSeconds: 600,
      approve,
    });
  let n = 0;
  /** A call of agent:alpha left waiting; its id. */
  const waiting = async (ms = 4_000) => {
    const id = `gated-${n++}`;
    void dispatcher.call(
      gatedSession,
      { id, name: 'deploy', arguments: { service: id } },
      {
        principal: 'agent:alpha',
        session: 's-a',
        deadline: Date.now() + ms,
      },
    );
    return (await person.awaitPending(id, { grant: grant('user:root', {}) })).approvalId;
  };

  beforeAll(async () => {
    world = await startApprovalsWorld(app, bucket, {
      approvals: { identity: IdentityGate.forIssuers([issuer.getPublicKey()]) },
    });
    ({ nc, target, dispatcher, person } = world);
  });
  afterAll(() => world.stop());

  it('refuses $pending and $answer without a grant, with one from another issuer, or without nats.approve', async () => {
    const approvalId = await waiting();
    const refusals: Array<[string, Record<string, string>]> = [
      ['none', {}],
      ['a claimed principal', { principal: 'user:ana' }],
      ['another issuer', { grant: grant('user:ana', {}, createAccount()) }],
      ['no approve claim', { grant: grant('user:ana') }],
    ];
    for (const [why, ctx] of refusals) {
      await expect(person.pending(ctx), why).rejects.toMatchObject({ code: 'forbidden' });
      await expect(person.answer({ approvalId, decision: 'approve' }, ctx), why).rejects.toMatchObject({
        code: 'forbidden',
      });
    }
    expect((await person.pending({ grant: grant('user:root', {}) })).approvals.map((a) => a.approvalId)).toContain(
      approvalId,
    );
  });

  it('answers a flood of $pending without rights at once, forbidden, and stores nothing of it', async () => {
    const store = await ApprovalStore.bind(nc, bucket);
    const before = await store.lastRevision();
    const mallory = { grant: grant('user:mallory') };
    // The control, in this run: as many listings by an approver, which read the pending list.
    const root = { grant: grant('user:root', {}) };
    let started = performance.now();
    await Promise.all(Array.from({ length: 500 }, () => person.pending(root)));
    const allowed = performance.now() - started;
    started = performance.now();
    const answers = await Promise.allSettled(
      Array.from({ length: 500 }, (_, i) => person.pending(i % 2 ? {} : mallory)),
    );
    const ms = performance.now() - started;
    expect(answers.every((a) => a.status === 'rejected' && (a.reason as { code?: string }).code === 'forbidden')).toBe(
      true,
    );
    expect(await store.lastRevision()).toBe(before);
    // Refused before any work: no dearer than the listings, with a wide margin for a busy machine.
    expect(ms).toBeLessThan(3 * Math.max(allowed, 100));
  });

  it('lists and answers only the approvals its claim covers, every list present matching', async () => {
    const approvalId = await waiting();
    const notCovering = [
      { tools: ['other_tool'] },
      { targets: ['app.elsewhere'] },
      { principals: ['agent:beta'] },
      { tools: ['deploy'], principals: ['user:*'] },
    ];
    for (const approve of notCovering) {
      const ctx = { grant: grant('user:ana', approve) };
      expect((await person.pending(ctx)).approvals, JSON.stringify(approve)).toEqual([]);
      await expect(person.answer({ approvalId, decision: 'approve' }, ctx)).rejects.toMatchObject({
        code: 'forbidden',
        message: expect.stringContaining('does not cover'),
      });
    }
    const covering = { grant: grant('user:ana', { tools: ['dep*'], targets: ['app.*'], principals: ['agent:*'] }) };
    expect((await person.pending(covering)).approvals.map((a) => a.approvalId)).toContain(approvalId);
    const answer = await person.answer({ approvalId, decision: 'approve' }, covering);
    // `by` is the grant's sub, whatever Matrix-Principal the request claims.
    expect(answer.by).toBe('user:ana');
  });

  it('matches targets as NATS subject patterns, as the policy does: app.> covers app.x, * one token only', async () => {
    const approvalId = await waiting();
    const listedFor = async (targets: string[]) =>
      (await person.pending({ grant: grant('user:ana', { targets }) })).approvals.map((a) => a.approvalId);
    // The mount is `app.m<pid>x<n>`: two tokens.
    for (const covering of [['app.>'], ['>'], ['app.*'], ['*.*'], [app]])
      expect(await listedFor(covering)).toContain(approvalId);
    for (const not of [['*'], ['app'], ['app.*.>'], ['app*'], ['other.>']])
      expect(await listedFor(not), not.join()).not.toContain(approvalId);
    const answer = await person.answer(
      { approvalId, decision: 'reject', reason: 'seen' },
      { grant: grant('user:ana', { targets: ['app.>'] }) },
    );
    expect(answer.by).toBe('user:ana');
  });

  it('never lets a principal answer its own call, and does not list it to them', async () => {
    const approvalId = await waiting();
    const own = { grant: grant('agent:alpha', {}) };
    expect((await person.pending(own)).approvals.some((a) => a.approvalId === approvalId)).toBe(false);
    await expect(person.answer({ approvalId, decision: 'approve' }, own)).rejects.toMatchObject({
      code: 'forbidden',
      message: expect.stringContaining('its own call'),
    });
  });

  it('runs the call once the covering approver says yes, recorded under the grant’s sub', async () => {
    const id = 'gated-run';
    const running = dispatcher.call(
      gatedSession,
      { id, name: 'deploy', arguments: { service: 'run' } },
      {
        principal: 'agent:alpha',
        session: 's-a',
        deadline: Date.now() + 10_000,
      },
    );
    const ana = { grant: grant('user:ana', { tools: ['deploy'] }), principal: 'user:forged' };
    const pending = await person.awaitPending(id, ana);
    expect((await person.answer({ approvalId: pending.approvalId, decision: 'approve' }, ana)).by).toBe('user:ana');
    expect(await running).toMatchObject({ isError: false, structured: { deployed: 'run' } });
    expect(target.seen.filter((s) => (s.args as { service?: string }).service === 'run')).toHaveLength(1);
  });
});
