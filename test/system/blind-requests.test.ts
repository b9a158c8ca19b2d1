/**
 * A copied grant is useless to another NATS user, blind requests included, under
 * deploy/nats.conf (agents in account AGENTS, importing the service's ops from MATRIX with
 * `share: true`) and a service that trusts one issuer. `agent-2`, holding a copy of `agent`'s
 * grant (bound with `nats.user`), publishes each op an agent may send with a reply subject under
 * `_INBOX_agent` (it cannot read the answer, but an unbound or inbox-bound grant would run as
 * `agent`): every one is refused `wrong_holder` (`agent` receives the refusal on its inbox), no
 * call reaches the target, no task is made or cancelled, no call in flight is cancelled; a
 * `Nats-Request-Info` the sender set itself changes nothing, nor one the server's is joined to
 * (a header block left unterminated). `agent` with its own grant is served.
 * An answer aimed at the change events every agent hears is not taken for a change.
 */
import { connect } from 'node:net';
import { decode, encode } from '@msgpack/msgpack';
import { headers, type Msg, type NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { watchRegistry } from '../../src/registry/events.js';
import type { Task } from '../../src/tasks/types.js';
import { eventually } from '../harness/eventually.js';
import { oneToolContext, type SecuredBus, startSecuredBus, users } from '../harness/identity.js';

const session = { profile: 'default', toolContextRefs: ['spy-tools', 'blind-hold'] };
const wrongHolder = { code: 'forbidden', details: { grant: 'wrong_holder' } };

describe('blind requests with a copy of a grant bound to its NATS user', () => {
  let bus: SecuredBus;
  let agentNc: NatsConnection;
  let otherNc: NatsConnection;
  let agent: BusClient;
  /** What arrived on `agent`'s inbox under `_INBOX_agent.blind.`, by subject. */
  const arrived = new Map<string, Msg>();
  let grant: string;
  let n = 0;

  beforeAll(async () => {
    bus = await startSecuredBus();
    const operator = new BusClient(await bus.connect('operator'), { timeoutMs: 5_000 });
    await operator.request('system.tools', '$register', {
      spec: oneToolContext('blind-hold', 'spy_hold', 'app.spy', '$hold'),
    });
    operator.close();
    agentNc = await bus.connect('agent');
    otherNc = await bus.connect('agent2');
    agent = new BusClient(agentNc, { timeoutMs: 10_000 });
    agentNc.subscribe('_INBOX_agent.blind.>', { callback: (_err, msg) => void arrived.set(msg.subject, msg) });
    await agentNc.flush();
    grant = bus.grant({ resolve: session, user: 'agent', account: 'AGENTS', inbox: '_INBOX_agent' });
  }, 60_000);
  afterAll(async () => {
    agent?.close();
    await bus?.stop();
  });

  /**
   * Publishes `body` to `subject` as agent-2 with `grant`, its reply subject under agent's inbox,
   * and `forged` values of `Nats-Request-Info` set first; resolves with what agent's inbox got back.
   */
  async function blind(subject: string, body: unknown, forged: string[] = []): Promise<Record<string, unknown>> {
    const reply = `_INBOX_agent.blind.${n++}`;
    const h = headers();
    h.set('Matrix-Grant', grant);
    for (const user of forged) h.append('Nats-Request-Info', JSON.stringify({ acc: 'AGENTS', user }));
    otherNc.publish(subject, encode(body), { reply, headers: h });
    await otherNc.flush();
    const msg = await eventually(() => arrived.get(reply) ?? expect.fail(`no answer on ${reply}`));
    return decode(msg.data) as Record<string, unknown>;
  }

  const callBody = (id: string, more: Record<string, unknown> = {}) => ({
    session,
    call: { id, name: 'spy_run', arguments: {} },
    ...more,
  });

  it('refuses a blind $call (wrong_holder): the target never sees it, forged Nats-Request-Info or not', async () => {
    const before = bus.spy.count('$run');
    for (const forged of [[], ['agent'], ['agent', 'agent']]) {
      const answer = await blind('system.dispatcher.$call', callBody(`blind-${forged.length}`), forged);
      expect(answer, `${forged.length} forged`).toMatchObject({ error: wrongHolder });
    }
    expect(bus.spy.count('$run')).toBe(before);
    // The holder, with the same grant, is served.
    await expect(
      agent.request<ToolResult>('system.dispatcher', '$call', callBody('own'), { grant }),
    ).resolves.toMatchObject({ isError: false });
    expect(bus.spy.count('$run')).toBe(before + 1);
  });

  it('refuses a blind $resolve, and serves the holder', async () => {
    expect(await blind('system.tools.$resolve', session)).toMatchObject({ error: wrongHolder });
    expect(await blind('system.tools.$resolve', session, ['agent'])).toMatchObject({ error: wrongHolder });
    await expect(agent.request('system.tools', '$resolve', session, { grant })).resolves.toMatchObject({
      matrixTools: expect.arrayContaining([expect.objectContaining({ name: 'spy_run' })]),
    });
  });

  it('makes no task for a blind $call, and cancels or reads none of the holder’s', async () => {
    const tasksOf = async () =>
      (await agent.request<{ tasks: Task[] }>('system.tasks', '$list', {}, { grant })).tasks.map((t) => t.taskId);
    const before = await tasksOf();
    const holds = bus.spy.count('$hold');
    const made = await blind('system.dispatcher.$call', { ...callBody('blind-task'), task: {} }, ['agent']);
    expect(made).toMatchObject({ error: wrongHolder });
    expect(await tasksOf()).toEqual(before);

    const { task } = await agent.request<{ task: Task }>(
      'system.dispatcher',
      '$call',
      { session, call: { id: 'own-task', name: 'spy_hold', arguments: {} }, task: {} },
      { grant },
    );
    await eventually(() => expect(bus.spy.count('$hold')).toBe(holds + 1));
    const ref = { taskId: task.taskId };
    for (const op of ['$cancel', '$get', '$result', '$list'])
      expect(await blind(`system.tasks.${op}`, op === '$list' ? {} : ref), op).toMatchObject({ error: wrongHolder });
    expect((await agent.request<Task>('system.tasks', '$get', ref, { grant })).status).toBe('working');
    const cancels = bus.spy.count('$cancel');
    expect((await agent.request<Task>('system.tasks', '$cancel', ref, { grant })).status).toBe('cancelled');
    // The target is told to stop after the answer: let that arrive before the next test counts.
    await eventually(() => expect(bus.spy.count('$cancel')).toBe(cancels + 1));
  });

  it('cancels no call in flight by a blind $cancel; the holder’s own $cancel stops it', async () => {
    const cancels = bus.spy.count('$cancel');
    const holds = bus.spy.count('$hold');
    const callId = 'blind-cancel-target';
    const call = agent.request<ToolResult>(
      'system.dispatcher',
      '$call',
      { session, call: { id: 'held', name: 'spy_hold', arguments: {} } },
      { grant, callId },
    );
    await eventually(() => expect(bus.spy.count('$hold')).toBe(holds + 1));
    // Every instance stays silent to it: nothing comes back on agent's inbox, and nothing is stopped.
    const reply = `_INBOX_agent.blind.${n++}`;
    const h = headers();
    h.set('Matrix-Grant', grant);
    h.set('Matrix-Call-Id', callId);
    otherNc.publish('system.dispatcher.$cancel', encode({ callId }), { reply, headers: h });
    await otherNc.flush();
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(arrived.has(reply)).toBe(false);
    expect(bus.spy.count('$cancel')).toBe(cancels);
    expect(await agent.request('system.dispatcher', '$cancel', { callId }, { grant, callId })).toEqual({
      cancelled: true,
    });
    expect((await call).error?.code).toBe('cancelled');
    await eventually(() => expect(bus.spy.count('$cancel')).toBe(cancels + 1));
  });

  it('refuses a blind $call whose header block, left unterminated, has the server join its header to a forged one', async () => {
    const before = bus.spy.count('$run');
    const forged = JSON.stringify({ acc: 'AGENTS', user: 'agent' });
    const { user, pass } = users.agent2;
    const url = new URL(bus.server.url);
    const socket = connect(Number(url.port), url.hostname);
    try {
      await new Promise((resolve) => socket.once('data', resolve));
      socket.write(`CONNECT ${JSON.stringify({ verbose: false, headers: true, protocol: 1, user, pass })}\r\n`);
      const body = Buffer.from(encode(callBody('joined')));
      // Ending in one CRLF: nats-server 2.9.10 strips two bytes and appends its own line, so its
      // value is joined to the forged one, or the forged one is followed by another header's line.
      const blocks = [
        `NATS/1.0\r\nMatrix-Grant: ${grant}\r\nNats-Request-Info: ${forged}\r\n`,
        `NATS/1.0\r\nMatrix-Grant: ${grant}\r\nNats-Request-Info: {}\r\nNats-Request-Info: ${forged}\r\nX-Mine: 1\r\n`,
      ];
      const replies = blocks.map(() => `_INBOX_agent.blind.${n++}`);
      blocks.forEach((block, i) => {
        const head = Buffer.from(block);
        socket.write(`HPUB system.dispatcher.$call ${replies[i]} ${head.length} ${head.length + body.length}\r\n`);
        socket.write(Buffer.concat([head, body, Buffer.from('\r\n')]));
      });
      for (const reply of replies) {
        const msg = await eventually(() => arrived.get(reply) ?? expect.fail(`no answer on ${reply}`));
        expect(decode(msg.data), reply).toMatchObject({ error: wrongHolder });
      }
      expect(bus.spy.count('$run')).toBe(before);
    } finally {
      socket.destroy();
    }
  });

  it('lets no agent pass off an answer it aims at the change events as a registry change', async () => {
    const heard: unknown[] = [];
    const raw: string[] = [];
    const stop = watchRegistry(agentNc, (event) => heard.push(event));
    agentNc.subscribe('system.tools.events.changed', { callback: (_err, msg) => void raw.push(msg.subject) });
    await agentNc.flush();
    // Across the import the service answers onto _R_.…, which the server routes to the subject the
    // sender named, in AGENTS: every agent subscribed there receives it, and none takes it for a change.
    otherNc.publish('system.tools.$list', encode({ limit: 1 }), { reply: 'system.tools.events.changed' });
    await otherNc.flush();
    await eventually(() => expect(raw).toHaveLength(1));
    await agent.request('system.tools', '$list', { limit: 1 });
    expect(heard).toEqual([]);
    stop();
  });

  it('refuses a grant bound to agent sent by agent-2 as a plain request too, and serves agent-2 its own', async () => {
    const other = new BusClient(otherNc, { timeoutMs: 5_000 });
    await expect(other.request('system.dispatcher', '$call', callBody('copy'), { grant })).rejects.toMatchObject(
      wrongHolder,
    );
    const own = bus.grant({ resolve: session, principal: 'agent:beta', user: 'agent-2', account: 'AGENTS' });
    await expect(
      other.request<ToolResult>('system.dispatcher', '$call', callBody('own-2'), { grant: own }),
    ).resolves.toMatchObject({ isError: false });
  });
});
