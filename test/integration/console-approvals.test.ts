/**
 * The console's Approvals page against a service that trusts issuers: without an approver grant
 * it says so and lists nothing; a pasted grant (its text, never a path) lists and answers as
 * the grant's sub; every answer is a write behind the token, and so is every listing: the
 * arguments are served only with the token, never to whoever merely reaches the port.
 */

import type { NatsConnection } from '@nats-io/nats-core';
import { createAccount } from '@nats-io/nkeys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningConsole, startConsole } from '../../src/console/server.js';
import type { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { IdentityGate } from '../../src/identity/gate.js';
import { mintGrant } from '../../src/identity/mint.js';
import {
  type ApprovalsClient,
  type ApprovalsWorld,
  gatedSession,
  startApprovalsWorld,
  uniqueApprovalsBucket,
} from '../harness/approvals.js';
import { uniqueMount } from '../harness/bus.js';

describe('the console’s Approvals page with trusted issuers', () => {
  let world: ApprovalsWorld;
  let nc: NatsConnection;
  let dispatcher: Dispatcher;
  let person: ApprovalsClient;
  let consoleApp: RunningConsole;
  const issuer = createAccount();
  const token = 'test-token';
  const app = uniqueMount('app');
  const bucket = uniqueApprovalsBucket();
  const ana = mintGrant(issuer, {
    principal: 'user:ana',
    session: 'ana',
    resolve: { profile: 'default' },
    ttlSeconds: 600,
    approve: { tools: ['deploy'] },
  });
  /** GET with the token (as the page's script sends it), or with `headers` instead. */
  const get = async (path: string, headers: Record<string, string> = { 'X-Console-Token': token }, at = consoleApp) => {
    const res = await fetch(new URL(path, at.url), { headers });
    return { status: res.status, text: await res.text() };
  };
  const post = async (path: string, fields: Record<string, string>) => {
    const res = await fetch(new URL(path, consoleApp.url), {
      method: 'POST',
      body: new URLSearchParams({ token, ...fields }),
      redirect: 'manual',
    });
    return { status: res.status, location: res.headers.get('location'), text: await res.text() };
  };

  beforeAll(async () => {
    world = await startApprovalsWorld(app, bucket, {
      approvals: { identity: IdentityGate.forIssuers([issuer.getPublicKey()]) },
    });
    ({ nc, dispatcher, person } = world);
    consoleApp = await startConsole(nc, { port: 0, allowWrites: true, token });
  });
  afterAll(async () => {
    await consoleApp.close();
    await world.stop();
  });

  it('says it has no approver grant, and the service refuses it the list', async () => {
    const page = await get('/approvals');
    expect(page.status).toBe(403);
    expect(page.text).toContain('This console has no approver grant');
    expect(page.text).toContain('Matrix-Grant is missing');
  });

  it('takes a pasted grant’s text, never a path to read', async () => {
    const refused = await post('/approvals/grant', { grant: '/etc/passwd' });
    expect(refused.status).toBe(400);
    expect(refused.text).toContain('that is not a grant');
    expect(refused.text).not.toContain('root:');
    expect((await post('/approvals/grant', { grant: ana, token: 'wrong' })).status).toBe(403);
    expect(await post('/approvals/grant', { grant: ana })).toMatchObject({ status: 303, location: '/approvals' });
  });

  it('lists the waiting call and approves it as the grant’s sub', async () => {
    const running = dispatcher.call(
      gatedSession,
      { id: 'console-1', name: 'deploy', arguments: { service: 'web' } },
      {
        principal: 'agent:alpha',
        session: 's-c',
        deadline: Date.now() + 15_000,
      },
    );
    const pending = await person.awaitPending('console-1', { grant: ana });
    const page = await get('/approvals');
    expect(page.status).toBe(200);
    expect(page.text).toContain(`data-approval-id="${pending.approvalId}"`);
    expect(page.text).toContain('agent:alpha');
    expect(page.text).not.toContain('This console has no approver grant');
    const bad = await post('/approvals/answer', { approvalId: pending.approvalId, decision: 'maybe' });
    expect(bad.status).toBe(400);
    const answered = await post('/approvals/answer', { approvalId: pending.approvalId, decision: 'approve' });
    expect(answered.status).toBe(303);
    expect(answered.location).toContain('by=user%3Aana');
    expect(await running).toMatchObject({ isError: false, structured: { deployed: 'web' } });
    expect((await get('/approvals')).text).not.toContain(`data-approval-id="${pending.approvalId}"`);
  });

  it('serves no approval nor its arguments without the token, page or live fragment, grant or not', async () => {
    const running = dispatcher.call(
      gatedSession,
      { id: 'console-2', name: 'deploy', arguments: { service: 'secret-ledger\u202e' } },
      { principal: 'agent:alpha', session: 's-c', deadline: Date.now() + 15_000 },
    );
    const pending = await person.awaitPending('console-2', { grant: ana });
    const readOnly = await startConsole(nc, { port: 0, approverGrant: ana });
    try {
      for (const [at, headers] of [
        [consoleApp, {}],
        [consoleApp, { 'X-Console-Fragment': '1' }],
        [consoleApp, { 'X-Console-Fragment': '1', 'X-Console-Token': 'wrong' }],
        [readOnly, {}],
        [readOnly, { 'X-Console-Fragment': '1', 'X-Console-Token': token }],
      ] as const) {
        const page = await get('/approvals', headers, at);
        expect(page.status).toBe(401);
        expect(page.text).not.toContain('secret-ledger');
        expect(page.text).not.toContain(pending.approvalId);
      }
      expect((await get('/approvals', {}, readOnly)).text).toContain(
        'This console is read-only, and lists no approvals',
      );
      const document = await get('/approvals', {});
      expect(document.text).toContain('Paste the token to see the pending approvals');
      expect(document.text).toContain('data-needs-token');
      // With the token: listed, the bidi override shown as an escape, not applied.
      const listed = await get('/approvals', { 'X-Console-Fragment': '1', 'X-Console-Token': token });
      expect(listed.status).toBe(200);
      expect(listed.text).toContain('secret-ledger\\u202e');
      expect(listed.text).not.toContain('\u202e');
    } finally {
      await readOnly.close();
    }
    await post('/approvals/answer', { approvalId: pending.approvalId, decision: 'reject', reason: 'test' });
    expect((await running).error?.code).toBe('approval_denied');
  });
});
