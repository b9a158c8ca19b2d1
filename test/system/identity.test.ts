import { jetstreamManager } from '@nats-io/jetstream';
import { headers, type NatsConnection, PermissionViolationError } from '@nats-io/nats-core';
import { createAccount } from '@nats-io/nkeys';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type CallEvent, encodeCallEvents } from '../../src/audit/events.js';
import { watchCalls } from '../../src/audit/log.js';
import { BusClient } from '../../src/bus/client.js';
import { ForbiddenError } from '../../src/bus/errors.js';
import { indexShardSubject, indexStreamName } from '../../src/bus/subjects.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { GrantedSession } from '../../src/identity/granted.js';
import { encodeGrant } from '../../src/identity/jwt.js';
import { GrantFailure } from '../../src/identity/types.js';
import type { ResolveRequest } from '../../src/registry/types.js';
import { eventually } from '../harness/eventually.js';
import { type SecuredBus, startSecuredBus } from '../harness/identity.js';

const reject = (failure: string) => ({ code: 'forbidden', details: { grant: failure } });

describe('identity on the bus: deploy/nats.conf and a service that trusts one issuer', () => {
  let bus: SecuredBus;
  let agentNc: NatsConnection;
  let agent: BusClient;
  let operator: BusClient;
  const events: CallEvent[] = [];

  beforeAll(async () => {
    bus = await startSecuredBus();
    agentNc = await bus.connect('agent');
    agent = new BusClient(agentNc, { timeoutMs: 5_000 });
    const operatorNc = await bus.connect('operator');
    operator = new BusClient(operatorNc, { timeoutMs: 5_000 });
    watchCalls(operatorNc, (e) => void events.push(e));
    await operatorNc.flush();
    await operator.request('system.sessions', '$write', {
      session: 'victim-42',
      values: { apiToken: 'tok-victim-secret' },
    });
    await operator.request('system.sessions', '$write', { session: 'sess-alpha', values: { note: 'mine' } });
  });
  // What reached the targets during the test that is running (each test counts its own).
  let baseline = { spy: 0, secret: 0 };
  beforeEach(() => {
    baseline = { spy: bus.spy.count(), secret: bus.secret.count() };
  });
  const reached = () => ({ spy: bus.spy.count() - baseline.spy, secret: bus.secret.count() - baseline.secret });
  afterAll(async () => {
    agent?.close();
    operator?.close();
    await bus?.stop();
  });

  const call = (
    session: ResolveRequest,
    name: string,
    args: Record<string, unknown>,
    ctx: { grant?: string; principal?: string; session?: string } = {},
    id = `c-${name}`,
  ) => agent.request<ToolResult>('system.dispatcher', '$call', { session, call: { id, name, arguments: args } }, ctx);

  it('says in its ready line that it takes identity from grants', () => {
    expect(bus.service.output()).toContain('identity: grants from 1 issuer(s)');
  });

  it('refuses the agent a subscription to every reply on the bus (_INBOX.>) and to other users’ inboxes', async () => {
    const refused: string[] = [];
    const watching = (async () => {
      for await (const s of agentNc.status()) {
        if (s.type === 'error' && s.error instanceof PermissionViolationError && s.error.operation === 'subscription')
          refused.push(String(s.error.subject));
      }
    })();
    const heard: string[] = [];
    for (const subject of [
      '_INBOX.>',
      '_INBOX_operator.>',
      '>',
      'system.dispatcher.events.call',
      'system.>',
      '$KV.>',
      '$JS.>',
    ]) {
      agentNc.subscribe(subject, { callback: (err, m) => void (err === null && heard.push(m.subject)) });
    }
    await agentNc.flush();
    // The operator's reply travels while the agent listens: it never reaches the agent.
    await operator.request('system.tools', '$list', { limit: 1 });
    await eventually(() =>
      expect(refused.sort()).toEqual(
        ['$JS.>', '$KV.>', '>', '_INBOX.>', '_INBOX_operator.>', 'system.>', 'system.dispatcher.events.call'].sort(),
      ),
    );
    expect(heard).toEqual([]);
    void watching;
  });

  it("keeps one agent off another's replies: each agent user receives on its own inbox only", async () => {
    const otherNc = await bus.connect('agent2');
    const refused: string[] = [];
    const watching = (async () => {
      for await (const s of otherNc.status()) {
        if (s.type === 'error' && s.error instanceof PermissionViolationError && s.error.operation === 'subscription')
          refused.push(String(s.error.subject));
      }
    })();
    const heard: string[] = [];
    otherNc.subscribe('_INBOX_agent.>', { callback: (err, m) => void (err === null && heard.push(m.subject)) });
    await otherNc.flush();
    // The first agent's call travels while the second listens on its inbox prefix: it never reaches it.
    await new BusClient(agentNc, { timeoutMs: 5_000 }).request('system.tools', '$list', { limit: 1 });
    await eventually(() => expect(refused).toEqual(['_INBOX_agent.>']));
    expect(heard).toEqual([]);
    await otherNc.close();
    void watching;
  });

  it('refuses the agent every subject but the dispatcher and the registry’s read ops, at once', async () => {
    const direct = [
      'system.sessions.$read',
      'system.sessions.$write',
      'system.traces.$query',
      'system.approvals.$decide',
      'system.agents.$introspect',
      'system.packages.$validate',
      'system.tools.$register',
      'system.tools.$unregister',
      'system.dispatcher.$introspect',
      'system.dispatcher.events.call',
      'app.spy.$run',
      'app.secret.$run',
      '$KV.matrix-sessions.victim-42',
      '$JS.API.STREAM.LIST',
      '$SRV.STATS',
      '$SRV.PING',
      '$SRV.INFO.system-tools',
      '_INBOX.forged-reply',
    ];
    // The server's permissions violation, not a timeout: refused, never delivered and left unanswered.
    for (const subject of direct) {
      await expect(agent.requestRaw(subject, { session: 'victim-42' }), subject).rejects.toBeInstanceOf(ForbiddenError);
    }
    expect(reached()).toEqual({ spy: 0, secret: 0 });
    // What it may do still works: discovery pings, and the registry's read ops.
    await expect(agent.request('system.tools', '$list', { limit: 1 })).resolves.toMatchObject({
      revision: expect.any(Number),
    });
    await expect(agent.request('system.tools', '$introspect', {})).resolves.toMatchObject({ mount: 'system.tools' });
  });

  it('refuses the operator and the agent a write into the audit trail or its trace-id index', async () => {
    const serviceNc = await bus.connect('service');
    const jsm = await jetstreamManager(serviceNc);
    const shard = indexShardSubject('MATRIX_AUDIT', 7);
    const index = indexStreamName('MATRIX_AUDIT');
    const stored = async () => (await jsm.streams.info(index, { subjects_filter: shard })).state.subjects?.[shard] ?? 0;
    const before = await stored();
    for (const client of [operator, agent]) {
      for (const subject of [shard, 'system.dispatcher.events.call']) {
        await expect(
          client.requestRaw(subject, { '0123456789abcdef0123456789abcdef': [1] }),
          subject,
        ).rejects.toBeInstanceOf(ForbiddenError);
      }
    }
    expect(await stored()).toBe(before);
    await serviceNc.close();
  });

  it("lets no mount's reply to the operator's ping land on the audit subject or the JetStream API", async () => {
    // A naive micro service as a mount's user: it answers its $SRV.PING onto whatever reply subject it is given.
    const mountNc = await bus.connect('spy');
    const operatorNc = await bus.connect('operator');
    const serviceNc = await bus.connect('service');
    const jsm = await jetstreamManager(serviceNc);
    let pinged = 0;
    mountNc.subscribe('$SRV.PING.app-spy', {
      callback: (_e, msg) => {
        pinged++;
        try {
          msg.respond(msg.reply?.startsWith('$JS.API.') ? JSON.stringify({ filter: '>' }) : encodeCallEvents([forged]));
        } catch {
          // A refused publish surfaces as the connection's permission error, not here.
        }
      },
    });
    await mountNc.flush();
    const forged: CallEvent = {
      callId: 'forged',
      name: 'x',
      target: 'app.x',
      op: '$run',
      session: 'victim-42',
      principal: 'agent:victim',
      outcome: 'ok',
      durationMs: 1,
      attempts: 1,
      at: new Date().toISOString(),
    };
    // Any call leaves a batch in the trail (this one is refused: no grant).
    await call({ profile: 'default' }, 'spy_run', {}).catch(() => undefined);
    const stored = async () => (await jsm.streams.info('MATRIX_AUDIT')).state.messages;
    await eventually(async () => expect(await stored()).toBeGreaterThan(0));
    const before = await stored();
    for (const reply of [
      'system.dispatcher.events.call',
      '$JS.API.STREAM.PURGE.MATRIX_AUDIT',
      `$JS.API.STREAM.DELETE.${indexStreamName('MATRIX_AUDIT')}`,
    ]) {
      operatorNc.publish('$SRV.PING.app-spy', new Uint8Array(), { reply });
    }
    await operatorNc.flush();
    // nats-server 2.9.10 delivers all three pings; 2.15.3 and 2.14.10 deliver only the first, not
    // those whose reply subject is in the JetStream API (measured): whichever arrive are answered.
    await eventually(() => expect(pinged).toBeGreaterThanOrEqual(1));
    await new Promise((resolve) => setTimeout(resolve, 500));
    await mountNc.flush().catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await stored()).toBe(before);
    await expect(jsm.streams.info(indexStreamName('MATRIX_AUDIT'))).resolves.toMatchObject({
      config: { name: indexStreamName('MATRIX_AUDIT') },
    });
    for (const nc of [mountNc, operatorNc, serviceNc]) await nc.close().catch(() => undefined);
  });

  it('refuses $call and $resolve without a grant, whatever profile, refs or skills the body claims', async () => {
    const claims: ResolveRequest[] = [
      { profile: 'default' },
      { profile: 'nobody', toolContextRefs: ['actor-edit'] },
      { profile: 'default', skills: [{ name: 'sneak', toolContextRefs: ['spy-tools'] }] },
      { profile: 'default', requires: ['actor.edit'] },
    ];
    for (const session of claims) {
      await expect(call(session, 'matrix_invoke', { target: 'app.spy', op: '$run', args: {} })).rejects.toMatchObject(
        reject(GrantFailure.Missing),
      );
      await expect(
        call(session, 'spy_run', {}, { principal: 'user:root-admin', session: 'victim-42' }, 'no-grant'),
      ).rejects.toMatchObject(reject(GrantFailure.Missing));
      await expect(agent.request('system.tools', '$resolve', session)).rejects.toMatchObject(
        reject(GrantFailure.Missing),
      );
    }
    expect(reached()).toEqual({ spy: 0, secret: 0 });
    // Each refused call has its audit event, without the identity the caller claimed.
    await eventually(() =>
      expect(events.filter((e) => e.callId === 'no-grant' && e.code === 'forbidden')).toHaveLength(claims.length),
    );
    expect(events.some((e) => e.principal === 'user:root-admin' || e.session === 'victim-42')).toBe(false);
  });

  it('refuses a body that asks for other authority than its grant', async () => {
    const grant = bus.grant({ resolve: { profile: 'default' } });
    const asks: ResolveRequest[] = [
      { profile: 'edit' },
      { profile: 'default', toolContextRefs: ['actor-edit'] },
      { profile: 'default', worker: 'codex' },
      { profile: 'default', skills: [{ name: 'sneak', toolContextRefs: ['spy-tools'] }] },
      { profile: 'default', requires: ['actor.edit'] },
      { profile: 'default', environment: { repoRoot: '/' } },
    ];
    for (const session of asks) {
      await expect(call(session, 'spy_run', {}, { grant })).rejects.toMatchObject(reject(GrantFailure.Authority));
      await expect(agent.request('system.tools', '$resolve', session, { grant })).rejects.toMatchObject(
        reject(GrantFailure.Authority),
      );
    }
    // Presentation is the caller's: a format and onlyAvailable pass.
    const resolved = await agent.request<{ contexts: string[]; providerTools?: unknown[] }>(
      'system.tools',
      '$resolve',
      { profile: 'default', format: 'openai', onlyAvailable: true },
      { grant },
    );
    expect(resolved.contexts).toEqual(['actor-readonly']);
    expect(resolved.providerTools?.length).toBeGreaterThan(0);
    expect(reached()).toEqual({ spy: 0, secret: 0 });
  });

  it('refuses malformed, untrusted, badly signed, tampered, expired and not-yet-valid grants, each by name', async () => {
    const session = { profile: 'default', toolContextRefs: ['spy-tools'] };
    const good = bus.grant({ resolve: session });
    const [h, c, s] = good.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(c, 'base64url').toString());
    const widened = Buffer.from(
      JSON.stringify({
        ...claims,
        nats: { ...claims.nats, resolve: { ...session, toolContextRefs: ['spy-tools', 'actor-edit'] } },
      }),
    ).toString('base64url');
    const stranger = createAccount();
    // Signed by a stranger, claiming the trusted issuer: its claims are whole, its signature is not the issuer's.
    const forgedBody = { ...claims, iss: bus.issuer.getPublicKey() };
    const forged = `${h}.${Buffer.from(JSON.stringify(forgedBody)).toString('base64url')}.${Buffer.from(stranger.sign(Buffer.from(`${h}.${Buffer.from(JSON.stringify(forgedBody)).toString('base64url')}`))).toString('base64url')}`;
    const cases: Array<[string, string]> = [
      ['garbage', GrantFailure.Malformed],
      ['a.b.c', GrantFailure.Malformed],
      [`${h}.${c}`, GrantFailure.Malformed],
      [`${h}.${c}.${s.slice(0, 20)}`, GrantFailure.Malformed],
      [bus.grant({ resolve: session }, stranger), GrantFailure.UntrustedIssuer],
      [forged, GrantFailure.BadSignature],
      [`${h}.${widened}.${s}`, GrantFailure.Tampered],
      [bus.grant({ resolve: session, ttlSeconds: 60 }, bus.issuer, Date.now() - 3_600_000), GrantFailure.Expired],
      [bus.grant({ resolve: session, notBeforeSeconds: 600 }), GrantFailure.NotYetValid],
    ];
    for (const [grant, failure] of cases) {
      await expect(call(session, 'spy_run', {}, { grant }), failure).rejects.toMatchObject(reject(failure));
      await expect(agent.request('system.tools', '$resolve', session, { grant }), failure).rejects.toMatchObject(
        reject(failure),
      );
    }
    // A NATS user JWT signed by the trusted key is not a grant either.
    const userJwt = encodeGrant(
      {
        sub: 'agent:alpha',
        exp: Math.floor(Date.now() / 1000) + 60,
        nats: { type: 'user', session: 's', resolve: session } as never,
      },
      bus.issuer,
    );
    await expect(call(session, 'spy_run', {}, { grant: userJwt })).rejects.toMatchObject(
      reject(GrantFailure.Malformed),
    );
    expect(reached()).toEqual({ spy: 0, secret: 0 });
    // The control: the same grant, untouched, reaches the target.
    expect(await call(session, 'spy_run', {}, { grant: good })).toMatchObject({
      isError: false,
      structured: { ran: true },
    });
    expect(reached()).toEqual({ spy: 1, secret: 0 });
  });

  it('sends the grant’s principal and session downstream, whatever headers the caller forged', async () => {
    const grant = bus.grant({
      principal: 'agent:beta',
      session: 'sess-beta',
      resolve: { profile: 'default', toolContextRefs: ['spy-tools'] },
    });
    const before = bus.spy.seen.length;
    const result = await call(
      { profile: 'default', toolContextRefs: ['spy-tools'] },
      'spy_run',
      { x: 1 },
      { grant, principal: 'user:root-admin', session: 'victim-42' },
    );
    expect(result).toMatchObject({ isError: false });
    const seen = bus.spy.seen.slice(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]?.headers).toMatchObject({ 'Matrix-Principal': 'agent:beta', 'Matrix-Session': 'sess-beta' });
    expect(seen[0]?.headers['Matrix-Grant']).toBeUndefined();
    const event = await eventually(
      () => events.find((e) => e.callId === 'c-spy_run' && e.session === 'sess-beta') ?? false,
    );
    expect(event).toMatchObject({ principal: 'agent:beta', session: 'sess-beta', outcome: 'ok' });
    expect(events.some((e) => e.principal === 'user:root-admin' || e.session === 'victim-42')).toBe(false);
  });

  it('lets the approver see the verified principal: only user:ops-* may matrix_invoke $delete', async () => {
    const edit = { profile: 'edit' };
    const ops = bus.grant({ principal: 'user:ops-ann', session: 'sess-ops', resolve: edit });
    const agentGrant = bus.grant({ principal: 'agent:gamma', session: 'sess-gamma', resolve: edit });
    const before = bus.spy.count('$delete');
    const denied = await call(
      edit,
      'matrix_invoke',
      { target: 'app.spy', op: '$delete', args: {} },
      { grant: agentGrant, principal: 'user:ops-root' },
    );
    expect(denied).toMatchObject({ isError: true, error: { code: 'approval_denied' } });
    expect(bus.spy.count('$delete')).toBe(before);
    const allowed = await call(edit, 'matrix_invoke', { target: 'app.spy', op: '$delete', args: {} }, { grant: ops });
    expect(allowed).toMatchObject({ isError: false, structured: { deleted: true } });
    expect(bus.spy.count('$delete')).toBe(before + 1);
    expect(bus.spy.seen.at(-1)?.headers['Matrix-Principal']).toBe('user:ops-ann');
  });

  it('reads only the caller’s own session state, and the sessions its grant names', async () => {
    const grant = bus.grant({ resolve: { profile: 'default' } }); // sess-alpha
    const own = await call({ profile: 'default' }, 'session_state_read', {}, { grant, session: 'victim-42' });
    expect(own).toMatchObject({ isError: false, structured: { session: 'sess-alpha', state: { note: 'mine' } } });
    const theirs = await call(
      { profile: 'default' },
      'session_state_read',
      { session: 'victim-42' },
      { grant, session: 'victim-42' },
    );
    expect(theirs).toMatchObject({ isError: true, error: { code: 'forbidden' } });
    expect(theirs.content).not.toContain('tok-victim-secret');
    // Through matrix_invoke (approved for app.spy only) the sessions mount is not reached at all; its own check stands anyway.
    const edit = bus.grant({ resolve: { profile: 'edit' } });
    const invoked = await call(
      { profile: 'edit' },
      'matrix_invoke',
      { target: 'system.sessions', op: '$read', args: { session: 'victim-42' } },
      { grant: edit },
    );
    expect(invoked.isError).toBe(true);
    expect(invoked.content).not.toContain('tok-victim-secret');
    const named = bus.grant({ resolve: { profile: 'default' }, readSessions: ['victim-42'] });
    const allowed = await call(
      { profile: 'default' },
      'session_state_read',
      { session: 'victim-42' },
      { grant: named },
    );
    expect(allowed).toMatchObject({
      isError: false,
      structured: { session: 'victim-42', state: { apiToken: 'tok-victim-secret' } },
    });
  });

  it('never lets the service answer onto a subject the agent names as its reply (a confused deputy)', async () => {
    const grant = bus.grant({ resolve: { profile: 'default' } });
    const stateBefore = await operator.request<{ revision: number }>('system.sessions', '$read', {
      session: 'victim-42',
    });
    const kvBefore = await operator.request<{ revision: number }>('system.tools', '$list', { limit: 1 });
    const json = headers();
    json.set('Content-Type', 'application/json');
    json.set('Matrix-Grant', grant);
    const body = new TextEncoder().encode(
      JSON.stringify({ session: { profile: 'default' }, call: { id: 'x', name: 'matrix_introspect', arguments: {} } }),
    );
    const replies = [
      'app.spy.$run',
      'app.secret.$run',
      '$KV.matrix-sessions.victim-42',
      '$KV.matrix-tool-contexts.planted',
      '$JS.API.STREAM.DELETE.KV_matrix-sessions',
      'system.tools.events.changed',
      'system.dispatcher.events.call',
      'system.sessions.$write',
    ];
    for (const reply of replies) {
      agentNc.publish('system.dispatcher.$call', body, { reply, headers: json });
      agentNc.publish('system.tools.$resolve', new TextEncoder().encode('{"profile":"default"}'), {
        reply,
        headers: json,
      });
      agentNc.publish('$SRV.PING', new Uint8Array(), { reply });
    }
    await agentNc.flush();
    // A request that comes after them all: once it is answered, theirs were handled too.
    await agent.request('system.tools', '$list', { limit: 1 }, { grant });
    await call({ profile: 'default' }, 'matrix_introspect', {}, { grant });
    expect(reached()).toEqual({ spy: 0, secret: 0 });
    expect(await operator.request('system.sessions', '$read', { session: 'victim-42' })).toMatchObject({
      revision: stateBefore.revision,
      state: { apiToken: 'tok-victim-secret' },
    });
    const list = await operator.request<{ revision: number; contexts: Array<{ key: string }> }>(
      'system.tools',
      '$list',
      {},
    );
    expect(list.revision).toBe(kvBefore.revision);
    expect(list.contexts.map((c) => c.key)).not.toContain('planted');
  });

  it('gives the agent no discovery request that a naive micro service would answer onto a subject of its choice', async () => {
    // A third-party service as a mount's user: it answers $SRV.PING onto any reply subject, as the NATS micro libraries do.
    const mountNc = await bus.connect('spy');
    let pinged = 0;
    mountNc.subscribe('$SRV.PING.app-spy', {
      callback: (_e, msg) => {
        pinged++;
        msg.respond(JSON.stringify({ type: 'io.nats.micro.v1.ping_response', name: 'naive' }));
      },
    });
    await mountNc.flush();
    const before = await operator.request<{ revision: number }>('system.sessions', '$read', { session: 'victim-42' });
    for (const ping of ['$SRV.PING', '$SRV.PING.app-spy']) {
      agentNc.publish(ping, new Uint8Array(), { reply: '$KV.matrix-sessions.victim-42' });
      await expect(agent.requestRaw(ping, {})).rejects.toBeInstanceOf(ForbiddenError);
    }
    // The control: the same ping from the operator reaches it, onto the operator's own inbox.
    await operator.requestRaw('$SRV.PING.app-spy', {}, { timeoutMs: 1_000 }).catch(() => undefined);
    await eventually(() => expect(pinged).toBe(1));
    expect(await operator.request('system.sessions', '$read', { session: 'victim-42' })).toMatchObject({
      revision: before.revision,
    });
    await mountNc.close();
  });

  it('serves a library session under a grant (what examples/oracle.ts does with MATRIX_GRANT)', async () => {
    const granted = new GrantedSession(
      bus.grant({
        principal: 'agent:oracle',
        session: 'sess-oracle',
        resolve: { profile: 'default', toolContextRefs: ['spy-tools'] },
      }),
    );
    expect((await granted.resolve(agent)).contexts).toEqual(['spy-tools']);
    const before = bus.spy.seen.length;
    expect(await granted.callRemote(agent, { id: 'o1', name: 'spy_run', arguments: {} })).toMatchObject({
      isError: false,
    });
    expect(bus.spy.seen.slice(before).map((s) => s.headers['Matrix-Principal'])).toEqual(['agent:oracle']);
  });
});
