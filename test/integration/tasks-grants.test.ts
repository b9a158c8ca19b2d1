/**
 * With trusted issuers a task belongs to the principal and session of the grant that made it,
 * whatever headers say: the same grant reads it; a grant of another principal, or of the same
 * principal in another session, gets not_found; no grant at all is forbidden.
 */
import { createAccount } from '@nats-io/nkeys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusClient } from '../../src/bus/client.js';
import { ForbiddenError, NotFoundError } from '../../src/bus/errors.js';
import { IdentityGate } from '../../src/identity/gate.js';
import { mintGrant } from '../../src/identity/mint.js';
import type { Task } from '../../src/tasks/types.js';
import { uniqueMount } from '../harness/bus.js';
import { slowContext, startTaskBus, type TaskBus } from '../harness/slow-mount.js';

const SLOW = uniqueMount('slow');
const spec = slowContext('tasks-grants', SLOW);
const resolve = { profile: 'default', toolContextRefs: ['tasks-grants'] };

describe('tasks under grants', () => {
  let bus: TaskBus;
  let client: BusClient;
  const issuer = createAccount();
  const grant = (principal: string, session: string) =>
    mintGrant(issuer, { principal, session, resolve, ttlSeconds: 600 });

  beforeAll(async () => {
    bus = await startTaskBus(SLOW, spec, { identity: IdentityGate.forIssuers([issuer.getPublicKey()]) });
    client = bus.client;
  });
  afterAll(() => bus.stop());

  it('belongs to the grant’s principal and session, not to what headers claim', async () => {
    const mine = grant('agent:hana', 's-hana');
    const { task } = await client.request<{ task: Task }>(
      'system.dispatcher',
      '$call',
      { session: resolve, call: { id: 'g-1', name: 'work', arguments: { steps: 1, stepMs: 1 } }, task: {} },
      { grant: mine, principal: 'agent:someone-else' },
    );
    const get = (ctx: Record<string, string>) =>
      client.request<Task>('system.tasks', '$get', { taskId: task.taskId }, ctx);
    expect((await get({ grant: mine })).taskId).toBe(task.taskId);
    await expect(get({ grant: grant('agent:ivan', 's-hana') })).rejects.toThrow(NotFoundError);
    await expect(get({ grant: grant('agent:hana', 's-other') })).rejects.toThrow(NotFoundError);
    await expect(get({ principal: 'agent:hana', session: 's-hana' })).rejects.toThrow(ForbiddenError);
    await expect(get({ grant: `${mine.slice(0, -4)}AAAA` })).rejects.toThrow(ForbiddenError);
    // A grant bound to another NATS user's inbox prefix is not its holder's here (wrong_holder).
    const bound = mintGrant(issuer, {
      principal: 'agent:hana',
      session: 's-hana',
      resolve,
      ttlSeconds: 600,
      inbox: '_INBOX_agent-hana',
    });
    await expect(get({ grant: bound })).rejects.toMatchObject({
      code: 'forbidden',
      details: { grant: 'wrong_holder' },
    });
  });
});
