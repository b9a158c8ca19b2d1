import { decode } from '@msgpack/msgpack';
import type { NatsConnection } from '@nats-io/nats-core';
import { Svcm } from '@nats-io/services';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { newTraceparent, traceIdOf } from '../../src/bus/context.js';
import { NotFoundError } from '../../src/bus/errors.js';
import type { Mount } from '../../src/bus/mount.js';
import { contracts, SchemaId } from '../../src/contracts/schemas.js';
import { CALL_EVENTS } from '../../src/dispatcher/audit.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { dispatcherMount } from '../../src/dispatcher/mount.js';
import type { CallEvent, ToolResult } from '../../src/dispatcher/types.js';
import { builtinContexts } from '../../src/registry/builtins.js';
import { registryMount } from '../../src/registry/mount.js';
import { Registry } from '../../src/registry/registry.js';
import { StaticStore, storedBuiltin } from '../../src/registry/store.js';
import type { MatrixToolProjection, ResolveRequest, ToolContextSpec } from '../../src/registry/types.js';
import { testConnection, uniqueMount } from '../harness/bus.js';
import { silence, startTarget, type Target, TargetError } from '../harness/targets.js';

const T = uniqueMount('app');
const tool = (name: string, op: string, extra: Partial<MatrixToolProjection> = {}): MatrixToolProjection => ({
  name,
  description: `${name} for tests`,
  inputSchema: { type: 'object' },
  target: T,
  op,
  ...extra,
});
const searchSchema = {
  type: 'object' as const,
  additionalProperties: false,
  required: ['q'],
  properties: { q: { type: 'string' }, limit: { type: 'integer', minimum: 1, maximum: 10 } },
};
const matrixInvoke = builtinContexts.find((c) => c.key === 'actor-edit')?.matrixTools?.[0] as MatrixToolProjection;

const testContexts: ToolContextSpec[] = [
  {
    key: 'dispatch-test',
    title: 'Dispatch test',
    description: 'tools for dispatcher tests',
    matrixTools: [
      tool('search', '$echo', { inputSchema: searchSchema, resultMode: 'json' }),
      tool('read_text', '$text', { resultMode: 'text' }),
      tool('digest', '$nested', { resultMode: 'summary' }),
      tool('boom', '$throw'),
      tool('stall', '$never', { timeoutMs: 300 }),
      tool('flaky', '$flaky', { annotations: { idempotent: true } }),
      tool('big', '$big'),
      tool('abyss', '$abyss', { resultMode: 'json' }),
      tool('deep', '$deep', { resultMode: 'json' }),
      tool('nobody', '$x', { target: uniqueMount('nobody') }),
      tool('gated', '$echo'),
    ],
    sdkTools: ['run_shell'],
    permissions: { approval: { tools: ['gated'] } },
    timeoutMs: 5_000,
  },
  {
    key: 'invoke-narrow',
    title: 'Narrow invoke',
    description: 'matrix_invoke to one op only',
    matrixTools: [matrixInvoke],
    permissions: { approval: { tools: ['matrix_invoke'] }, allowTargets: [`${T}.$echo`, 'system.tools.>'] },
  },
];

const session: ResolveRequest = { profile: 'test', toolContextRefs: ['dispatch-test'] };
const invokeSession: ResolveRequest = { profile: 'test', toolContextRefs: ['invoke-narrow'] };

type Approver = 'approve' | 'reject' | 'slow' | 'none';

/** `levels` arrays, each holding the next. */
function nestedArrays(levels: number): unknown {
  let value: unknown = [];
  for (let i = 1; i < levels; i++) value = [value];
  return value;
}

/** MessagePack of arrays nested 100,000 deep: decodable, too deep for JSON.stringify. */
const abyss = Uint8Array.from({ length: 100_001 }, (_, i) => (i < 100_000 ? 0x91 : 0x90));

describe('the dispatcher', () => {
  let nc: NatsConnection;
  let registry: Mount;
  let target: Target;
  let approvals: Target | undefined;
  let dispatcher: Dispatcher;
  const events: CallEvent[] = [];
  let flakyFailures = 0;

  const useApprover = async (mode: Approver) => {
    approvals?.stop();
    approvals = undefined;
    if (mode === 'none') return;
    approvals = await startTarget(nc, 'system.approvals', {
      $decide: (args) => {
        if (mode === 'slow') return new Promise((resolve) => setTimeout(() => resolve({ decision: 'approve' }), 1_000));
        expect(contracts().check(SchemaId.ApprovalRequest)(args)).toBeUndefined();
        return mode === 'approve' ? { decision: 'approve', by: 'tester' } : { decision: 'reject', reason: 'too risky', by: 'tester' };
      },
    });
  };

  beforeAll(async () => {
    nc = await testConnection();
    const store = new StaticStore(
      [...builtinContexts.map(storedBuiltin), ...testContexts.map((spec) => ({ spec, source: 'registered' as const, revision: 1 }))],
      1,
    );
    registry = await registryMount(nc, { registry: new Registry(store) }).start();
    target = await startTarget(nc, T, {
      $echo: (args, seen) => ({
        args,
        traceparent: seen.headers.traceparent,
        deadline: seen.headers['Matrix-Deadline'],
        session: seen.headers['Matrix-Session'],
      }),
      $text: () => ({ text: 'plain words', extra: 1 }),
      $nested: () => ({ rows: Array.from({ length: 2_000 }, (_, i) => ({ i, name: `row ${i}`, tags: ['x', 'y'], deep: { a: { b: { c: i } } } })) }),
      $throw: () => new TargetError(500, 'internal', 'the database is down'),
      $never: () => silence,
      $flaky: () => (flakyFailures-- > 0 ? new TargetError(500, 'internal', 'transient') : { ok: true }),
      $big: () => ({ blob: 'z'.repeat(200_000) }),
      $abyss: () => abyss,
    });
    nc.subscribe(CALL_EVENTS, {
      callback: (_e, msg) => {
        const batch = decode(msg.data) as CallEvent[];
        expect(contracts().check(SchemaId.CallEvents)(batch)).toBeUndefined();
        events.push(...batch);
      },
    });
    dispatcher = new Dispatcher(nc, { approvalTimeoutMs: 300, summaryBudget: 500 });
  });
  afterAll(async () => {
    dispatcher.close();
    target.stop();
    approvals?.stop();
    await registry.stop();
  });
  afterEach(() => expect(contracts().check(SchemaId.ToolResult)(last)).toBeUndefined());

  let last: ToolResult | undefined;
  const call = async (name: string, args: Record<string, unknown> | string = {}, s = session, ctx = {}) => {
    last = await dispatcher.call(s, { id: `c-${name}`, name, arguments: args }, ctx);
    return last;
  };

  describe('forwarding a passing call', () => {
    it('in json mode: the reply as text and as structured, with the caller’s trace id at the target', async () => {
      const traceparent = newTraceparent();
      const r = await call('search', { q: 'cats', limit: 3 }, session, { traceparent, session: 'sess-9' });
      expect(r).toMatchObject({ callId: 'c-search', name: 'search', isError: false });
      const reply = r.structured as { args: unknown; traceparent: string; deadline: string; session: string };
      expect(reply.args).toEqual({ q: 'cats', limit: 3 });
      expect(traceIdOf(reply.traceparent)).toBe(traceIdOf(traceparent));
      expect(reply.session).toBe('sess-9');
      expect(Number(reply.deadline)).toBeGreaterThan(Date.now());
      expect(JSON.parse(r.content)).toEqual(reply);
    });

    it('in text mode: the reply’s text field', async () => {
      expect(await call('read_text')).toMatchObject({ isError: false, content: 'plain words' });
    });

    it('in summary mode: within its budget, the same every time', async () => {
      const a = await call('digest');
      const b = await call('digest');
      expect(a.isError).toBe(false);
      expect(a.content.length).toBeLessThanOrEqual(500);
      expect(a.content).toContain('more items');
      expect(b.content).toBe(a.content);
    });

    it('caps a reply larger than the cap and says how much it cut', async () => {
      const r = await call('big');
      expect(r.content.length).toBeLessThanOrEqual(64 * 1024);
      expect(r.truncated).toEqual({ shown: expect.any(Number), total: 200_011 });
      expect(r.content).toMatch(/truncated: showing \d+ of 200011 characters\]$/);
    });
  });

  describe('refusing a call before the target', () => {
    it('refuses a tool outside the context, naming the ones available', async () => {
      const before = target.count();
      const r = await call('matrix_invoke', { target: T, op: '$echo' });
      expect(r).toMatchObject({ isError: true, error: { code: 'not_found' } });
      expect(r.content).toContain('Available tools: search, read_text');
      expect(target.count()).toBe(before);
    });

    it('tells the model that an SDK tool is its own to call', async () => {
      expect(await call('run_shell')).toMatchObject({ isError: true, error: { code: 'forbidden' }, content: expect.stringContaining('SDK tool') });
    });

    it('refuses invalid arguments, naming each field', async () => {
      const before = target.count('$echo');
      const r = await call('search', { limit: 99, colour: 'red' });
      expect(r).toMatchObject({ isError: true, error: { code: 'bad_request' } });
      expect(r.content).toContain('argument "q" is required');
      expect(r.content).toContain('argument "limit" must be <= 10');
      expect(r.content).toContain('argument "colour" is not a known field');
      const unreadable = await call('search', '{"q": ');
      expect(unreadable.content).toContain('not valid JSON');
      expect(target.count('$echo')).toBe(before);
    });

    it('accepts arguments as JSON text, as providers send them', async () => {
      expect(await call('search', '{"q":"dogs"}')).toMatchObject({ isError: false, structured: { args: { q: 'dogs' } } });
    });
  });

  describe('approval', () => {
    const gatedCalls = () => target.seen.filter((s) => s.op === '$echo' && (s.args as { who?: string }).who === 'gated').length;

    it('forwards an approved call', async () => {
      await useApprover('approve');
      expect(await call('gated', { who: 'gated' })).toMatchObject({ isError: false });
      expect(gatedCalls()).toBe(1);
      expect(approvals?.count('$decide')).toBe(1);
    });

    it.each([
      ['reject', /rejected by tester: too risky/],
      ['none', /no approver is running/],
      ['slow', /no approver decided within 300 ms/],
    ] as const)('never calls the target when the approver says %s', async (mode, reason) => {
      await useApprover(mode);
      const started = performance.now();
      const r = await call('gated', { who: 'gated' });
      expect(r).toMatchObject({ isError: true, error: { code: 'approval_denied' } });
      expect(r.content).toMatch(reason);
      expect(performance.now() - started).toBeLessThan(300 + 100);
      expect(gatedCalls()).toBe(1);
    });
  });

  describe('a target that fails', () => {
    it('reports a target that throws, without retrying a non-idempotent tool', async () => {
      const before = target.count('$throw');
      const r = await call('boom');
      expect(r).toMatchObject({ isError: true, error: { code: 'internal' }, content: expect.stringContaining('the database is down') });
      expect(target.count('$throw')).toBe(before + 1);
    });

    it('retries an idempotent tool after a transient failure', async () => {
      flakyFailures = 2;
      const before = target.count('$flaky');
      expect(await call('flaky')).toMatchObject({ isError: false, structured: { ok: true } });
      expect(target.count('$flaky')).toBe(before + 3);
    });

    it('gives up at the tool’s deadline when the target never answers', async () => {
      const started = performance.now();
      const r = await call('stall');
      const waited = performance.now() - started;
      expect(r).toMatchObject({ isError: true, error: { code: 'timeout' } });
      expect(waited).toBeGreaterThanOrEqual(295);
      expect(waited).toBeLessThan(300 + 50);
    });

    it('answers at once when the target has no responders', async () => {
      const started = performance.now();
      const r = await call('nobody');
      expect(r).toMatchObject({ isError: true, error: { code: 'unavailable' }, content: expect.stringContaining('no responders') });
      expect(performance.now() - started).toBeLessThan(50);
    });

    it('keeps to the caller’s deadline when it is shorter than the tool’s', async () => {
      const started = performance.now();
      const r = await call('stall', {}, session, { deadline: Date.now() + 100 });
      expect(r.error?.code).toBe('timeout');
      expect(performance.now() - started).toBeLessThan(100 + 50);
    });

    it('answers a reply too deep to show as text with a result, not a throw', async () => {
      const r = await call('abyss');
      expect(r).toMatchObject({ isError: true, error: { code: 'internal' }, content: expect.stringContaining('cannot be shown as text') });
    });
  });

  describe('matrix_invoke', () => {
    it('reaches an allowed subject once approved', async () => {
      await useApprover('approve');
      const r = await call('matrix_invoke', { target: T, op: '$echo', args: { q: 'via invoke' } }, invokeSession);
      expect(r).toMatchObject({ isError: false, structured: { args: { q: 'via invoke' } } });
      expect(approvals?.seen[0]?.args).toMatchObject({ tool: 'matrix_invoke', target: T, op: '$echo' });
    });

    it('refuses a subject its context does not allow, before asking anyone', async () => {
      const before = target.count('$text');
      const asked = approvals?.count() ?? 0;
      const r = await call('matrix_invoke', { target: T, op: '$text' }, invokeSession);
      expect(r).toMatchObject({ isError: true, error: { code: 'forbidden' }, content: expect.stringContaining(`allows only ${T}.$echo`) });
      expect(target.count('$text')).toBe(before);
      expect(approvals?.count()).toBe(asked);
    });

    it('refuses a reserved subject even when allowTargets match it', async () => {
      const r = await call('matrix_invoke', { target: 'system.tools', op: '$list' }, invokeSession);
      expect(r).toMatchObject({ isError: true, error: { code: 'forbidden' }, content: expect.stringContaining('reserved') });
    });
  });

  describe('the session', () => {
    it('throws not_found for a session with unknown refs (the oracle’s fault, not the model’s)', async () => {
      await expect(dispatcher.call({ profile: 'p', toolContextRefs: ['nope'] }, { id: '1', name: 'x' })).rejects.toBeInstanceOf(NotFoundError);
    });
  });

  describe('under load', () => {
    it('answers 1,000 calls in flight at once through the library', async () => {
      const results = await Promise.all(
        Array.from({ length: 1_000 }, (_, i) => dispatcher.call(session, { id: `l${i}`, name: 'search', arguments: { q: `q${i}` } })),
      );
      expect(results.filter((r) => !r.isError)).toHaveLength(1_000);
      expect(results.map((r) => (r.structured as { args: { q: string } }).args.q)).toEqual(results.map((_, i) => `q${i}`));
    });

    it('fails fast past the bound of calls in flight per target', async () => {
      const tight = new Dispatcher(nc, { maxInFlightPerTarget: 10, audit: false });
      const results = await Promise.all(Array.from({ length: 30 }, (_, i) => tight.call(session, { id: `t${i}`, name: 'search', arguments: { q: 'x' } })));
      tight.close();
      const refused = results.filter((r) => r.isError);
      expect(refused.length).toBeGreaterThan(0);
      expect(refused[0]?.content).toMatch(/calls in flight, the most allowed/);
      expect(results.filter((r) => !r.isError).length).toBeGreaterThanOrEqual(10);
    });
  });

  describe('audit events', () => {
    it('emits one per call, with the trace but never the arguments', async () => {
      const traceparent = newTraceparent();
      await call('search', { q: 'secret-password-123' }, session, { traceparent, principal: 'agent:1' });
      await nc.flush();
      await new Promise((r) => setTimeout(r, 20));
      const event = events.find((e) => e.traceparent === traceparent);
      expect(event).toMatchObject({ name: 'search', target: T, op: '$echo', outcome: 'ok', principal: 'agent:1', attempts: 1 });
      expect(traceIdOf(event?.traceparent)).toBe(traceIdOf(traceparent));
      expect(JSON.stringify(event)).not.toContain('secret-password-123');
      expect(events.some((e) => e.name === 'gated' && e.outcome === 'error' && e.code === 'approval_denied' && e.attempts === 0)).toBe(true);
    });
  });
});

describe('system.dispatcher', () => {
  let nc: NatsConnection;
  let mounts: Mount[];
  let target: Target;
  let client: BusClient;

  beforeAll(async () => {
    nc = await testConnection();
    const store = new StaticStore(
      [...builtinContexts.map(storedBuiltin), ...testContexts.map((spec) => ({ spec, source: 'registered' as const, revision: 1 }))],
      1,
    );
    target = await startTarget(nc, T, { $echo: (args, seen) => ({ args, traceparent: seen.headers.traceparent }), $deep: () => nestedArrays(80) });
    mounts = await Promise.all([registryMount(nc, { registry: new Registry(store) }).start(), dispatcherMount(nc).start()]);
    client = new BusClient(nc, { timeoutMs: 10_000 });
  });
  afterAll(async () => {
    client.close();
    target.stop();
    await Promise.all(mounts.map((m) => m.stop()));
  });

  it('runs $call over the wire with the caller’s trace, in MessagePack and JSON', async () => {
    const traceparent = newTraceparent();
    for (const json of [false, true]) {
      const r = await client.request<ToolResult>(
        'system.dispatcher',
        '$call',
        { session, call: { id: 'w1', name: 'search', arguments: { q: 'wire' } } },
        { traceparent, json },
      );
      expect(contracts().check(SchemaId.ToolResult)(r)).toBeUndefined();
      expect(r).toMatchObject({ callId: 'w1', isError: false, structured: { args: { q: 'wire' } } });
      expect(traceIdOf((r.structured as { traceparent: string }).traceparent)).toBe(traceIdOf(traceparent));
    }
  });

  it('answers a malformed $call with a protocol error listing every violation', async () => {
    const failure = client.request('system.dispatcher', '$call', { call: { name: 5 }, extra: true });
    await expect(failure).rejects.toMatchObject({ code: 'bad_request' });
    const err = (await failure.catch((e: unknown) => e)) as { violations: Array<{ path: string }> };
    expect(err.violations.map((v) => v.path).sort()).toEqual(['/call/id', '/call/name', '/extra', '/session']);
  });

  it('leaves out a structured reply too deep to travel, keeping its text', async () => {
    const r = await client.request<ToolResult>('system.dispatcher', '$call', { session, call: { id: 'w3', name: 'deep' } });
    expect(r).toMatchObject({ isError: false, content: JSON.stringify(nestedArrays(80)) });
    expect(r).not.toHaveProperty('structured');
  });

  it('answers a failed tool as a result, not an error', async () => {
    const r = await client.request<ToolResult>('system.dispatcher', '$call', { session, call: { id: 'w2', name: 'nope' } });
    expect(r).toMatchObject({ isError: true, error: { code: 'not_found' } });
  });

  it('answers 1,000 calls in flight at once', async () => {
    const results = await Promise.all(
      Array.from({ length: 1_000 }, (_, i) =>
        client.request<ToolResult>('system.dispatcher', '$call', { session, call: { id: `m${i}`, name: 'search', arguments: { q: `m${i}` } } }),
      ),
    );
    expect(results.filter((r) => !r.isError)).toHaveLength(1_000);
    expect(new Set(results.map((r) => r.callId)).size).toBe(1_000);
  });

  it('reports per-op figures in $SRV.STATS', async () => {
    const stats = [];
    for await (const s of await new Svcm(nc).client({ strategy: 'timer', maxWait: 300 }).stats('system-dispatcher')) stats.push(s);
    const call = stats[0]?.endpoints?.find((e) => e.name === 'call');
    expect(call).toMatchObject({ subject: 'system.dispatcher.$call', queue_group: 'system-dispatcher' });
    expect(call?.num_requests).toBeGreaterThanOrEqual(1_003);
    expect(call?.num_errors).toBe(1);
    expect(call?.average_processing_time).toBeGreaterThan(0);
  });
});
