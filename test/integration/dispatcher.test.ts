import { decode } from '@msgpack/msgpack';
import { headers, type NatsConnection } from '@nats-io/nats-core';
import { type Service, Svcm } from '@nats-io/services';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { approvalGate } from '../../src/approvals/gate.js';
import type { CallEvent } from '../../src/audit/events.js';
import { CALL_EVENTS } from '../../src/audit/log.js';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import type { CallContext } from '../../src/bus/context.js';
import { contracts, SchemaId } from '../../src/bus/contracts.js';
import { NotFoundError } from '../../src/bus/errors.js';
import { Header, newTraceparent, traceIdOf } from '../../src/bus/headers.js';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { packagesMount } from '../../src/reference-mounts/packages.js';
import { builtinContexts } from '../../src/registry/builtins.js';
import { Registry } from '../../src/registry/registry.js';
import { StaticStore, storedBuiltin } from '../../src/registry/store.js';
import { registryMount } from '../../src/registry/system-tools.js';
import type { MatrixToolProjection, ResolveRequest, ToolContextSpec } from '../../src/registry/types.js';
import { sharedNats, testConnection, uniqueMount } from '../harness/bus.js';
import { guarded } from '../harness/callbacks.js';
import { eventually } from '../harness/eventually.js';
import { silence, startTarget, type Target, TargetError } from '../harness/targets.js';

const T = uniqueMount('app');
/** A mount that answers every request with its own 503 (NATS micro `req.Error("503", "busy")`). */
const BUSY = uniqueMount('busy');
/** A mount built on `@nats-io/services` that speaks JSON, as micro services in every language do. */
const MICRO = uniqueMount('micro');
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
      tool('slow', '$slow'),
      tool('garbage', '$garbage'),
      tool('busy', '$work', { target: BUSY }),
      tool('busy_idempotent', '$work', { target: BUSY, annotations: { idempotent: true } }),
      tool('widget', '$widget', { target: MICRO, encoding: 'json' }),
      tool('widget_status', '$status', { target: MICRO }),
    ],
    permissions: { approval: { tools: ['gated'] } },
    timeoutMs: 5_000,
  },
  {
    key: 'invoke-narrow',
    title: 'Narrow invoke',
    description: 'matrix_invoke to one op only',
    matrixTools: [matrixInvoke],
    permissions: {
      approval: { tools: ['matrix_invoke'] },
      allowTargets: [`${T}.$echo`, `${BUSY}.$work`, 'system.tools.>'],
    },
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

/** JSON text of `{"spec": …}` nested `levels` maps deep: arguments whose depth shows only once parsed. */
const deepSpec = (levels: number) => `{"spec":${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}}`;

/** MessagePack of arrays nested 100,000 deep: decodable, too deep for JSON.stringify, past a reply's 128 levels. */
const abyss = Uint8Array.from({ length: 100_001 }, (_, i) => (i < 100_000 ? 0x91 : 0x90));

describe('the dispatcher', () => {
  let nc: NatsConnection;
  let registry: Mount;
  let target: Target;
  let approvals: Target | undefined;
  let dispatcher: Dispatcher;
  let busy: { count: number; stop(): void };
  let micro: Service;
  const events: CallEvent[] = [];
  let flakyFailures = 0;
  /** The deadline the dispatcher forwarded with the last call to the stalling op. */
  const forwardedDeadline = () => {
    const sent = target.seen.filter((s) => s.op === '$never').at(-1)?.headers ?? {};
    return Number(sent[Header.Deadline] ?? sent[Header.Deadline.toLowerCase()]);
  };

  const useApprover = async (mode: Approver) => {
    approvals?.stop();
    approvals = undefined;
    if (mode === 'none') return;
    approvals = await startTarget(nc, 'system.approvals', {
      $decide: guarded((args) => {
        if (mode === 'slow') return new Promise((resolve) => setTimeout(() => resolve({ decision: 'approve' }), 1_000));
        expect(contracts().check(SchemaId.ApprovalRequest)(args)).toBeUndefined();
        return mode === 'approve'
          ? { decision: 'approve', by: 'tester' }
          : { decision: 'reject', reason: 'too risky', by: 'tester' };
      }),
    });
  };

  beforeAll(async () => {
    nc = await testConnection();
    const store = new StaticStore(
      [
        ...builtinContexts.map(storedBuiltin),
        ...testContexts.map((spec) => ({ spec, source: 'registered' as const, revision: 1 })),
      ],
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
      $nested: () => ({
        rows: Array.from({ length: 2_000 }, (_, i) => ({
          i,
          name: `row ${i}`,
          tags: ['x', 'y'],
          deep: { a: { b: { c: i } } },
        })),
      }),
      $throw: () => new TargetError(500, 'internal', 'the database is down'),
      $never: () => silence,
      $flaky: () => (flakyFailures-- > 0 ? new TargetError(500, 'internal', 'transient') : { ok: true }),
      $big: () => ({ blob: 'z'.repeat(200_000) }),
      $abyss: () => abyss,
      $slow: () => new Promise((resolve) => setTimeout(() => resolve({ ok: true }), 100)),
      $garbage: () => Uint8Array.of(0xc1, 0x7b),
    });
    busy = await startBusyMount(nc, BUSY);
    micro = await startJsonMicroMount(nc, MICRO);
    nc.subscribe(CALL_EVENTS, {
      callback: guarded((_e, msg) => {
        const batch = decode(msg.data) as CallEvent[];
        expect(contracts().check(SchemaId.CallEvents)(batch)).toBeUndefined();
        events.push(...batch);
      }),
    });
    dispatcher = new Dispatcher(nc, { approvalTimeoutMs: 300, summaryBudget: 500 });
  });
  afterAll(async () => {
    dispatcher.close();
    target.stop();
    busy.stop();
    await micro.stop();
    approvals?.stop();
    await registry.stop();
  });
  let last: ToolResult | undefined;
  afterEach(() => {
    const result = last;
    last = undefined;
    if (result !== undefined) expect(contracts().check(SchemaId.ToolResult)(result)).toBeUndefined();
  });

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
      const coding = { profile: 'test', toolContextRefs: ['dispatch-test', 'repo-coding'] };
      expect(await call('run_shell', {}, coding)).toMatchObject({
        isError: true,
        error: { code: 'forbidden' },
        content: expect.stringContaining('SDK tool'),
      });
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
      expect(await call('search', '{"q":"dogs"}')).toMatchObject({
        isError: false,
        structured: { args: { q: 'dogs' } },
      });
    });

    it('refuses JSON text nested deeper than 64 levels before anything else, as a result', async () => {
      const before = target.count('$echo');
      for (const levels of [64, 5_000]) {
        const r = await call('search', deepSpec(levels));
        expect(r).toMatchObject({
          isError: true,
          error: { code: 'bad_request' },
          content: expect.stringContaining('nest deeper than 64 levels'),
        });
      }
      expect(target.count('$echo')).toBe(before);
    });
  });

  describe('OpenAI strict mode', () => {
    it('takes a null for an optional argument as absent, as a strict model sends it', async () => {
      const r = await call('search', '{"q":"cats","limit":null}');
      expect(r).toMatchObject({ isError: false, structured: { args: { q: 'cats' } } });
    });

    it('still refuses a null on a required argument whose schema forbids it', async () => {
      expect(await call('search', '{"q":null,"limit":null}')).toMatchObject({
        isError: true,
        error: { code: 'bad_request' },
        content: expect.stringContaining('argument "q" must be string'),
      });
    });
  });

  describe('approval', () => {
    const gatedCalls = () =>
      target.seen.filter((s) => s.op === '$echo' && (s.args as { who?: string }).who === 'gated').length;

    it('forwards an approved call', async () => {
      await useApprover('approve');
      const before = gatedCalls();
      expect(await call('gated', { who: 'gated' })).toMatchObject({ isError: false });
      expect(gatedCalls()).toBe(before + 1);
      expect(approvals?.count('$decide')).toBe(1);
    });

    it.each([
      ['reject', /rejected by tester: too risky/],
      ['none', /no approver is running/],
      ['slow', /no approver decided within 300 ms/],
    ] as const)('never calls the target when the approver says %s', async (mode, reason) => {
      await useApprover(mode);
      const before = gatedCalls();
      const r = await call('gated', { who: 'gated' });
      expect(r).toMatchObject({ isError: true, error: { code: 'approval_denied' } });
      // The reason names the window: a slow approver is given up on at 300 ms, not at the call's end.
      expect(r.content).toMatch(reason);
      expect(gatedCalls()).toBe(before);
    });

    it('names the window the call was given when no approver decided, however late it asked', async () => {
      await useApprover('slow');
      // The gate asks a few ms after the window was set: its words still name the whole window.
      const verdict = await approvalGate(
        new BusClient(nc),
        { callId: 'late-ask', tool: 'gated', target: T, op: '$echo', arguments: {} },
        {},
        { deadlineMs: Date.now() + 290, windowMs: 300 },
      );
      expect(verdict).toMatchObject({ approved: false, reason: 'no approver decided within 300 ms' });
    });
  });

  describe('a target that fails', () => {
    it('reports a target that throws, without retrying a non-idempotent tool', async () => {
      const before = target.count('$throw');
      const r = await call('boom');
      expect(r).toMatchObject({
        isError: true,
        error: { code: 'internal' },
        content: expect.stringContaining('the database is down'),
      });
      expect(target.count('$throw')).toBe(before + 1);
    });

    it('retries an idempotent tool after a transient failure', async () => {
      flakyFailures = 2;
      const before = target.count('$flaky');
      expect(await call('flaky')).toMatchObject({ isError: false, structured: { ok: true } });
      expect(target.count('$flaky')).toBe(before + 3);
    });

    it('sends a non-idempotent call to a mount that answers its own 503 once, keeping its message', async () => {
      const before = busy.count;
      const r = await call('busy');
      expect(r).toMatchObject({
        isError: true,
        error: { code: 'unavailable' },
        content: expect.stringContaining('busy'),
      });
      expect(busy.count - before).toBe(1);
    });

    it('retries a mount’s own 503 for an idempotent tool', async () => {
      const before = busy.count;
      expect(await call('busy_idempotent')).toMatchObject({ isError: true, error: { code: 'unavailable' } });
      expect(busy.count - before).toBe(3);
    });

    it('gives up at the tool’s deadline when the target never answers', async () => {
      const started = performance.now();
      const sentAfter = Date.now();
      const r = await call('stall');
      const waited = performance.now() - started;
      expect(r).toMatchObject({ isError: true, error: { code: 'timeout' } });
      expect(waited).toBeGreaterThanOrEqual(295);
      // The target was told the tool's deadline, 300 ms from the send (a dispatcher that waited
      // past it would hold the call to the caller's 30 s, past this test's own timeout).
      expect(forwardedDeadline()).toBeGreaterThanOrEqual(sentAfter + 300);
      expect(forwardedDeadline()).toBeLessThanOrEqual(Date.now());
    });

    it('answers at once when the target has no responders', async () => {
      // The control: what waiting out the tool's deadline (300 ms) takes here, now.
      let started = performance.now();
      expect((await call('stall')).error?.code).toBe('timeout');
      const deadline = performance.now() - started;
      // The fastest of three: one slowed by the machine's other work says nothing.
      let fastest = Number.POSITIVE_INFINITY;
      for (let i = 0; i < 3; i++) {
        started = performance.now();
        const r = await call('nobody');
        fastest = Math.min(fastest, performance.now() - started);
        expect(r).toMatchObject({
          isError: true,
          error: { code: 'unavailable' },
          content: expect.stringContaining('no responders'),
        });
      }
      expect(fastest).toBeLessThan(deadline / 2);
    });

    it('keeps to the caller’s deadline when it is shorter than the tool’s', async () => {
      const deadline = Date.now() + 100;
      const r = await call('stall', {}, session, { deadline });
      expect(r.error?.code).toBe('timeout');
      // The target is told the caller's deadline, the earlier of the two.
      expect(forwardedDeadline()).toBe(deadline);
    });

    it('answers a reply nested too deep with a result blaming its target, refused from its bytes', async () => {
      const r = await call('abyss');
      expect(r).toMatchObject({
        isError: true,
        error: { code: 'internal' },
        content: expect.stringContaining(
          'answered a reply refused unread for its shape: reply nests deeper than 128 levels',
        ),
      });
      expect(r.content).toContain('Its target misbehaves');
    });

    it('blames the target, not the arguments, for a reply nothing can decode', async () => {
      const r = await call('garbage');
      expect(r).toMatchObject({
        isError: true,
        error: { code: 'internal' },
        content: expect.stringContaining('cannot be read'),
      });
      expect(r.content).not.toContain('refused its arguments');
    });
  });

  describe('a mount built on @nats-io/services that speaks JSON', () => {
    it('gets its request as JSON when the projection says encoding json, and its JSON reply read right', async () => {
      const r = await call('widget', { size: 3 });
      expect(r).toMatchObject({
        isError: false,
        structured: { ok: true, got: { size: 3 }, contentType: 'application/json' },
      });
    });

    it('is read right when it answers JSON without a Content-Type to a MessagePack request', async () => {
      expect(await call('widget_status')).toMatchObject({ isError: false, structured: { ok: true } });
    });

    it('keeps the message of its micro error reply', async () => {
      const r = await call('widget', { size: -1 });
      expect(r).toMatchObject({
        isError: true,
        error: { code: 'bad_request' },
        content: expect.stringContaining('bad widget'),
      });
    });
  });

  describe('matrix_invoke', () => {
    it('reaches an allowed subject once approved', async () => {
      await useApprover('approve');
      const r = await call('matrix_invoke', { target: T, op: '$echo', args: { q: 'via invoke' } }, invokeSession);
      expect(r).toMatchObject({ isError: false, structured: { args: { q: 'via invoke' } } });
      expect(approvals?.seen[0]?.args).toMatchObject({ tool: 'matrix_invoke', target: T, op: '$echo' });
    });

    it('reaches its target at most once when approved, even when the target answers its own 503', async () => {
      await useApprover('approve');
      const before = busy.count;
      const r = await call('matrix_invoke', { target: BUSY, op: '$work', args: {} }, invokeSession);
      expect(r).toMatchObject({ isError: true, error: { code: 'unavailable' } });
      expect(approvals?.count('$decide')).toBe(1);
      expect(busy.count - before).toBe(1);
    });

    it('refuses a subject its context does not allow, before asking anyone', async () => {
      await useApprover('approve');
      const before = target.count('$text');
      const r = await call('matrix_invoke', { target: T, op: '$text' }, invokeSession);
      expect(r).toMatchObject({
        isError: true,
        error: { code: 'forbidden' },
        content: expect.stringContaining(`allows only ${T}.$echo`),
      });
      expect(target.count('$text')).toBe(before);
      expect(approvals?.count()).toBe(0);
    });

    it('refuses a reserved subject even when allowTargets match it', async () => {
      const r = await call('matrix_invoke', { target: 'system.tools', op: '$list' }, invokeSession);
      expect(r).toMatchObject({
        isError: true,
        error: { code: 'forbidden' },
        content: expect.stringContaining('reserved'),
      });
    });

    it('refuses a __proto__ key in its args as refused arguments, never asking or blaming the approver', async () => {
      await useApprover('approve');
      const before = target.count('$echo');
      const r = await call(
        'matrix_invoke',
        `{"target":"${T}","op":"$echo","args":{"__proto__":{"admin":true}}}`,
        invokeSession,
      );
      expect(r).toMatchObject({ isError: true, error: { code: 'bad_request' } });
      expect(r.content).toMatch(/The arguments of "matrix_invoke" were refused: they hold a key "__proto__"/);
      expect(r.content).not.toMatch(/approver/);
      expect(approvals?.count()).toBe(0);
      expect(target.count('$echo')).toBe(before);
    });
  });

  describe('the session', () => {
    it('throws not_found for a session with unknown refs (the oracle’s fault, not the model’s)', async () => {
      await expect(
        dispatcher.call({ profile: 'p', toolContextRefs: ['nope'] }, { id: '1', name: 'x' }),
      ).rejects.toBeInstanceOf(NotFoundError);
    });
  });

  describe('under load', () => {
    it('answers 1,000 calls in flight at once through the library', async () => {
      const results = await Promise.all(
        Array.from({ length: 1_000 }, (_, i) =>
          dispatcher.call(session, { id: `l${i}`, name: 'search', arguments: { q: `q${i}` } }),
        ),
      );
      expect(results.filter((r) => !r.isError)).toHaveLength(1_000);
      expect(results.map((r) => (r.structured as { args: { q: string } }).args.q)).toEqual(
        results.map((_, i) => `q${i}`),
      );
    });

    it('fails fast past the bound of calls in flight per target', async () => {
      const tight = new Dispatcher(nc, { maxInFlightPerTarget: 10, audit: false });
      const results = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          tight.call(session, { id: `t${i}`, name: 'search', arguments: { q: 'x' } }),
        ),
      );
      tight.close();
      const refused = results.filter((r) => r.isError);
      expect(refused.length).toBeGreaterThan(0);
      expect(refused[0]?.content).toMatch(/calls in flight, the most allowed/);
      expect(results.filter((r) => !r.isError).length).toBeGreaterThanOrEqual(10);
    });

    it("holds one principal to its share of a target's slots, so another principal's calls still go through", async () => {
      const fair = new Dispatcher(nc, { maxInFlightPerTarget: 40, maxInFlightPerPrincipal: 10, audit: false });
      const calls = (principal: string, n: number) =>
        Array.from({ length: n }, (_, i) =>
          fair.call(session, { id: `${principal}${i}`, name: 'slow', arguments: {} }, { principal }),
        );
      // 'greedy' asks for 30 at once (each answered after 100 ms), 'other' for 10 at the same time.
      const [greedy, other] = await Promise.all([Promise.all(calls('greedy', 30)), Promise.all(calls('other', 10))]);
      fair.close();
      expect(greedy.filter((r) => !r.isError)).toHaveLength(10);
      expect(greedy.filter((r) => r.isError).map((r) => r.error?.code)).toEqual(Array(20).fill('unavailable'));
      expect(greedy.find((r) => r.isError)?.content).toMatch(
        /you already have 10 calls in flight to .*, the most one caller may have/,
      );
      expect(other.filter((r) => !r.isError)).toHaveLength(10);
      // Every slot was given back: the greedy principal gets its share again.
      expect(fair.inFlight(T)).toBe(0);
    });

    it('gives back the in-flight slot of 2,000 calls of each way of failing, then serves a good call', async () => {
      const own = new Dispatcher(nc);
      /** How one call ended: its error code, or that it threw or rejected instead of giving a result. */
      const outcome = (name: string, args: Record<string, unknown>, ctx: CallContext, id: string): Promise<string> => {
        try {
          return own.call(session, { id, name, arguments: args }, ctx).then(
            (r) => r.error?.code ?? 'ok',
            () => 'rejected',
          );
        } catch {
          return Promise.resolve('threw');
        }
      };
      const run = async (name: string, args: Record<string, unknown>, context: () => CallContext = () => ({})) => {
        const outcomes: string[] = [];
        // 250 at a time: within a principal's share (256) of the bound of 1,024, so none is refused for the bound itself.
        for (let i = 0; i < 2_000; i += 250) {
          const ctx = context();
          outcomes.push(
            ...(await Promise.all(Array.from({ length: 250 }, (_, j) => outcome(name, args, ctx, `w${i + j}`)))),
          );
        }
        return new Set(outcomes);
      };
      expect(await own.call(session, { id: 'warm', name: 'search', arguments: { q: 'warm' } })).toMatchObject({
        isError: false,
      });
      // A throw inside the request: a header's (a line break in it), the encoder's (a value MessagePack has no form for).
      expect
        .soft(await run('read_text', {}, () => ({ principal: 'agent\r\nInjected: yes' })))
        .toEqual(new Set(['bad_request']));
      expect.soft(await run('read_text', { n: 10n })).toEqual(new Set(['bad_request']));
      expect.soft(await run('boom', {})).toEqual(new Set(['internal']));
      expect.soft(await run('stall', {}, () => ({ deadline: Date.now() + 50 }))).toEqual(new Set(['timeout']));
      expect(await own.call(session, { id: 'good', name: 'search', arguments: { q: 'after' } })).toMatchObject({
        isError: false,
      });
      expect(own.inFlight(T)).toBe(0);
      own.close();
    });
  });

  describe('audit events', () => {
    it('emits one per call, with the trace but never the arguments', async () => {
      const traceparent = newTraceparent();
      await call('search', { q: 'secret-password-123' }, session, { traceparent, principal: 'agent:1' });
      const event = await eventually(() => events.find((e) => e.traceparent === traceparent) ?? false);
      expect(event).toMatchObject({
        name: 'search',
        target: T,
        op: '$echo',
        outcome: 'ok',
        principal: 'agent:1',
        attempts: 1,
      });
      expect(JSON.stringify(event)).not.toContain('secret-password-123');
    });

    it('emits one for a call refused before the target, with no attempts', async () => {
      await useApprover('reject');
      const traceparent = newTraceparent();
      await call('gated', { who: 'audited' }, session, { traceparent });
      const event = await eventually(() => events.find((e) => e.traceparent === traceparent) ?? false);
      expect(event).toMatchObject({ name: 'gated', outcome: 'error', code: 'approval_denied', attempts: 0 });
    });

    it('emits one for arguments too deep to stringify, with a digest of their text', async () => {
      const traceparent = newTraceparent();
      expect((await call('search', deepSpec(5_000), session, { traceparent })).error?.code).toBe('bad_request');
      const event = await eventually(() => events.find((e) => e.traceparent === traceparent) ?? false);
      expect(event).toMatchObject({
        outcome: 'error',
        code: 'bad_request',
        argumentsDigest: expect.stringMatching(/^[0-9a-f]{64}$/),
      });
    });
  });

  describe('as system.dispatcher', () => {
    it('closes the dispatcher it created when it stops: its registry watch ends, its unsent audit events go out', async () => {
      const own = await connectBus({ ...sharedNats(), name: 'test-stop' });
      const subscriptions = () =>
        (own as unknown as { protocol: { subscriptions: { size(): number } } }).protocol.subscriptions.size();
      const before = subscriptions();
      const mount = await dispatcherMount(own).start();
      const client = new BusClient(nc);
      const traceparent = newTraceparent();
      const slowCalls = target.count('$slow');
      const pending = client.request<ToolResult>(
        'system.dispatcher',
        '$call',
        { session, call: { id: 'stop-1', name: 'slow' } },
        { traceparent },
      );
      await eventually(() => expect(target.count('$slow')).toBe(slowCalls + 1));
      // Stopped while the call is in flight: stop() answers it, then closes the dispatcher.
      await mount.stop();
      expect(subscriptions()).toBe(before);
      await own.flush();
      await own.close();
      expect(await pending).toMatchObject({ callId: 'stop-1', isError: false });
      client.close();
      await eventually(() =>
        expect(events.find((e) => e.traceparent === traceparent)).toMatchObject({ name: 'slow', outcome: 'ok' }),
      );
    });
  });
});

/** A raw responder that answers every request the NATS micro way with its own 503, and counts them. */
async function startBusyMount(nc: NatsConnection, name: string): Promise<{ count: number; stop(): void }> {
  const state = { count: 0, stop: () => sub.unsubscribe() };
  const sub = nc.subscribe(`${name}.*`, {
    callback: (_err, msg) => {
      state.count++;
      const h = headers();
      h.set('Nats-Service-Error-Code', '503');
      h.set('Nats-Service-Error', 'busy');
      msg.respond(new Uint8Array(0), { headers: h });
    },
  });
  await nc.flush();
  return state;
}

/**
 * A service on `@nats-io/services`, as a mount in Go or Python would be: it reads JSON, answers
 * JSON with no Content-Type, and fails with `respondError(400, "bad widget", <json>)`.
 */
async function startJsonMicroMount(nc: NatsConnection, name: string): Promise<Service> {
  const service = await new Svcm(nc).add({
    name: name.replaceAll('.', '-'),
    version: '1.0.0',
    queue: name.replaceAll('.', '-'),
  });
  service.addEndpoint('widget', {
    subject: `${name}.$widget`,
    handler: guarded((_err, msg) => {
      const request = msg.json<{ size: number }>();
      if (request.size < 0) msg.respondError(400, 'bad widget', JSON.stringify({ field: 'size', problem: 'negative' }));
      else msg.respond(JSON.stringify({ ok: true, got: request, contentType: msg.headers?.get('Content-Type') }));
    }),
  });
  service.addEndpoint('status', {
    subject: `${name}.$status`,
    handler: (_err, msg) => msg.respond(JSON.stringify({ ok: true })),
  });
  await nc.flush();
  return service;
}

describe('system.dispatcher', () => {
  let nc: NatsConnection;
  let mounts: Mount[];
  let target: Target;
  let client: BusClient;

  beforeAll(async () => {
    nc = await testConnection();
    const store = new StaticStore(
      [
        ...builtinContexts.map(storedBuiltin),
        ...testContexts.map((spec) => ({ spec, source: 'registered' as const, revision: 1 })),
      ],
      1,
    );
    target = await startTarget(nc, T, {
      $echo: (args, seen) => ({ args, traceparent: seen.headers.traceparent }),
      $deep: () => nestedArrays(80),
    });
    mounts = await Promise.all([
      registryMount(nc, { registry: new Registry(store) }).start(),
      dispatcherMount(nc).start(),
      packagesMount(nc).start(),
    ]);
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
    const failure = client.request('system.dispatcher', '$call', { call: { name: 5, extra: true } });
    await expect(failure).rejects.toMatchObject({ code: 'bad_request' });
    const err = (await failure.catch((e: unknown) => e)) as { violations: Array<{ path: string }> };
    expect(err.violations.map((v) => v.path).sort()).toEqual(['/call/extra', '/call/id', '/call/name', '/session']);
  });

  it('answers a $call with an unknown top-level field with that field alone', async () => {
    const failure = client.request('system.dispatcher', '$call', { extra: true, call: { name: 5 } });
    const err = (await failure.catch((e: unknown) => e)) as { violations: Array<{ path: string }> };
    expect(err.violations.map((v) => v.path)).toEqual(['/extra']);
  });

  it('leaves out a structured reply too deep to travel, keeping its text', async () => {
    const r = await client.request<ToolResult>('system.dispatcher', '$call', {
      session,
      call: { id: 'w3', name: 'deep' },
    });
    expect(r).toMatchObject({ isError: false, content: JSON.stringify(nestedArrays(80)) });
    expect(r).not.toHaveProperty('structured');
  });

  it('answers a failed tool as a result, not an error', async () => {
    const r = await client.request<ToolResult>('system.dispatcher', '$call', {
      session,
      call: { id: 'w2', name: 'nope' },
    });
    expect(r).toMatchObject({ isError: true, error: { code: 'not_found' } });
  });

  it('answers 1,000 calls in flight at once', async () => {
    const results = await Promise.all(
      Array.from({ length: 1_000 }, (_, i) =>
        client.request<ToolResult>('system.dispatcher', '$call', {
          session,
          call: { id: `m${i}`, name: 'search', arguments: { q: `m${i}` } },
        }),
      ),
    );
    expect(results.filter((r) => !r.isError)).toHaveLength(1_000);
    expect(new Set(results.map((r) => r.callId)).size).toBe(1_000);
  });

  it('reports per-op figures in $SRV.STATS', async () => {
    const callStats = async () => {
      const stats = [];
      for await (const s of await new Svcm(nc).client({ strategy: 'timer', maxWait: 300 }).stats('system-dispatcher'))
        stats.push(s);
      return stats[0]?.endpoints?.find((e) => e.name === 'call');
    };
    const before = await callStats();
    await client.request('system.dispatcher', '$call', {
      session,
      call: { id: 's1', name: 'search', arguments: { q: 'a' } },
    });
    await client.request('system.dispatcher', '$call', { session, call: { id: 's2', name: 'nope' } });
    await client.request('system.dispatcher', '$call', { call: {} }).catch(() => undefined);
    const after = await callStats();
    expect(after).toMatchObject({ subject: 'system.dispatcher.$call', queue_group: 'system-dispatcher' });
    expect((after?.num_requests ?? 0) - (before?.num_requests ?? 0)).toBe(3);
    expect((after?.num_errors ?? 0) - (before?.num_errors ?? 0)).toBe(1);
    expect(after?.average_processing_time).toBeGreaterThan(0);
  });

  describe('with arguments nested past the depth bound', () => {
    const packagesSession: ResolveRequest = { profile: 'test', toolContextRefs: ['repo-coding'] };
    const validate = (id: string, args: string | Record<string, unknown>) =>
      client.request<ToolResult>('system.dispatcher', '$call', {
        session: packagesSession,
        call: { id, name: 'package_validate', arguments: args },
      });

    it('answers ~1,030 calls with arguments as JSON text 110 levels deep as results, and still serves a good call', async () => {
      for (let i = 0; i < 1_030; i += 103) {
        const results = await Promise.all(
          Array.from({ length: 103 }, (_, j) => validate(`deep${i + j}`, deepSpec(110))),
        );
        for (const r of results) expect(r).toMatchObject({ isError: true, error: { code: 'bad_request' } });
      }
      const good = await validate('good', { spec: { key: 'fine' } });
      expect(good).toMatchObject({ isError: false, structured: { valid: false } });
    });

    it('answers arguments 5,000 levels deep with a result, not a protocol error', async () => {
      const r = await validate('abyss', deepSpec(5_000));
      expect(contracts().check(SchemaId.ToolResult)(r)).toBeUndefined();
      expect(r).toMatchObject({
        isError: true,
        error: { code: 'bad_request' },
        content: expect.stringContaining('nest deeper than 64 levels'),
      });
    });
  });
});

describe('the bus client under the dispatcher', () => {
  it('rejects, never throws, a request it cannot send: an unencodable body, a header with a line break, a closed connection', async () => {
    const own = await connectBus({ ...sharedNats(), name: 'test-unsendable' });
    const client = new BusClient(own);
    const outcome = (send: () => Promise<unknown>) => {
      try {
        return send().then(
          () => 'resolved',
          (err: Error) => err.name,
        );
      } catch {
        return 'threw';
      }
    };
    expect(await outcome(() => client.request(uniqueMount('x'), '$op', { n: 1n }))).toBe('UnsendableRequestError');
    expect(await outcome(() => client.request(uniqueMount('x'), '$op', {}, { session: 'a\nb' }))).toBe(
      'UnsendableRequestError',
    );
    await own.close();
    expect(await outcome(() => client.request(uniqueMount('x'), '$op', {}))).toBe('UnavailableError');
  });
});
