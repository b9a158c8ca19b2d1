import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { NatsConnection } from '@nats-io/nats-core';
import { createAccount } from '@nats-io/nkeys';
import { metrics, SpanStatusCode, trace } from '@opentelemetry/api';
import { type DataPoint, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import { newTraceparent, traceIdOf } from '../../src/bus/headers.js';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { localToolSource } from '../../src/dispatcher/session-cache.js';
import { mintGrant } from '../../src/identity/mint.js';
import { GrantVerifier } from '../../src/identity/verify.js';
import { builtinContexts } from '../../src/registry/builtins.js';
import { Registry } from '../../src/registry/registry.js';
import { StaticStore, storedBuiltin } from '../../src/registry/store.js';
import { registryMount } from '../../src/registry/system-tools.js';
import type { ResolveRequest, ToolContextSpec } from '../../src/registry/types.js';
import { activeInstruments, activeTracer, observeInFlight } from '../../src/telemetry/instruments.js';
import { startTelemetry } from '../../src/telemetry/sdk.js';
import { eventually } from '../harness/eventually.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { startTarget, type Target, TargetError } from '../harness/targets.js';

const T = 'app.telemetry';
const context: ToolContextSpec = {
  key: 'telemetry-test',
  title: 'Telemetry test',
  description: 'tools for telemetry tests',
  matrixTools: [
    { name: 'echo', description: 'echoes', inputSchema: { type: 'object' }, target: T, op: '$echo' },
    { name: 'boom', description: 'fails', inputSchema: { type: 'object' }, target: T, op: '$throw' },
    { name: 'gated', description: 'needs approval', inputSchema: { type: 'object' }, target: T, op: '$echo' },
    {
      name: 'slow',
      description: 'answers when the test says',
      inputSchema: { type: 'object' },
      target: T,
      op: '$slow',
    },
  ],
  permissions: { approval: { tools: ['gated'] } },
};
const session: ResolveRequest = { profile: 'test', toolContextRefs: ['telemetry-test'] };

/** A reader the test collects from when it wants, with no timer. */
class CollectingReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}

  /** The data points of one metric. */
  async points(name: string): Promise<DataPoint<unknown>[]> {
    const { resourceMetrics } = await this.collect();
    const metric = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((m) => m.descriptor.name === name);
    return (metric?.dataPoints ?? []) as DataPoint<unknown>[];
  }
}

/** The in-flight gauge of one target at a collection now. */
async function inFlightOf(reader: CollectingReader, target: string): Promise<unknown> {
  return (await reader.points('matrix.tool.calls.in_flight')).find((p) => p.attributes['matrix.target'] === target)
    ?.value;
}

/** The `matrix.cache.lookups` counter at a collection now, by `<cache> <result>`. */
async function lookups(reader: CollectingReader): Promise<Map<string, number>> {
  const points = await reader.points('matrix.cache.lookups');
  return new Map(
    points.map((p) => [`${p.attributes['matrix.cache']} ${p.attributes['matrix.cache.result']}`, p.value as number]),
  );
}

/** A server, a registry, a dispatcher and a target, shared by the file's tests. */
/** Answers of `$slow` calls waiting for the test to release them. */
const held: Array<() => void> = [];
const heldCall = () => new Promise((resolve) => held.push(() => resolve({ ok: true })));

async function startWorld(): Promise<{
  server: ProcessNats;
  nc: NatsConnection;
  dispatcher: Dispatcher;
  registry: Registry;
  targets: Target[];
}> {
  const server = await startNatsProcess();
  const nc = await connectBus({ servers: server.url });
  const registry = new Registry(
    new StaticStore([...builtinContexts.map(storedBuiltin), { spec: context, source: 'registered', revision: 1 }], 1),
  );
  const targets = [
    await startTarget(nc, T, {
      $echo: (args) => args,
      $slow: heldCall,
      $throw: () => new TargetError(500, 'internal', 'the database is down'),
    }),
    await startTarget(nc, 'system.approvals', {
      $decide: () => ({ decision: 'reject', reason: 'not today', by: 'tester' }),
    }),
  ];
  return { server, nc, dispatcher: new Dispatcher(nc, { source: localToolSource(registry) }), registry, targets };
}

describe('OpenTelemetry with the SDK in memory', () => {
  let world: Awaited<ReturnType<typeof startWorld>>;
  const spans = new InMemorySpanExporter();
  const reader = new CollectingReader();

  beforeAll(async () => {
    // Registered before the dispatcher is made, as serve does it: a dispatcher observes its
    // calls when an SDK is registered as it is made.
    trace.setGlobalTracerProvider(
      new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: spans })] }),
    );
    metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
    // As startTelemetry does: the instruments exist before the first call.
    activeInstruments();
    world = await startWorld();
  });
  afterAll(async () => {
    trace.disable();
    metrics.disable();
    world.dispatcher.close();
    for (const t of world.targets) t.stop();
    await world.nc.close();
    await world.server.stop();
  });

  it('makes each tool call an execute_tool span, a child of the caller’s traceparent, with the GenAI attributes', async () => {
    const traceparent = newTraceparent();
    const result = await world.dispatcher.call(
      session,
      { id: 'call-echo', name: 'echo', arguments: { q: 'x' } },
      { traceparent, session: 'sess-1', principal: 'ann' },
    );
    expect(result.isError).toBe(false);
    const span = spans.getFinishedSpans().find((s) => s.attributes['gen_ai.tool.call.id'] === 'call-echo');
    expect(span?.name).toBe('execute_tool echo');
    expect(span?.spanContext().traceId).toBe(traceIdOf(traceparent));
    expect(span?.parentSpanContext?.spanId).toBe(traceparent.slice(36, 52));
    expect(span?.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'echo',
      'gen_ai.tool.call.id': 'call-echo',
      'matrix.target': T,
      'matrix.op': '$echo',
      'matrix.outcome': 'ok',
      'matrix.attempts': 1,
      'matrix.session': 'sess-1',
      'matrix.principal': 'ann',
    });
    const [seconds, nanos] = span?.duration ?? [0, 0];
    expect(seconds * 1000 + nanos / 1e6).toBeCloseTo(result.durationMs, 1);

    const failed = await world.dispatcher.call(session, { id: 'call-boom', name: 'boom' }, { traceparent });
    expect(failed.error?.code).toBe('internal');
    const failedSpan = spans.getFinishedSpans().find((s) => s.attributes['gen_ai.tool.call.id'] === 'call-boom');
    expect(failedSpan?.attributes['error.type']).toBe('internal');
    expect(failedSpan?.status.code).toBe(SpanStatusCode.ERROR);
  });

  it('counts calls by tool and outcome, times them, and counts approvals by decision', async () => {
    await world.dispatcher.call(session, { id: 'm-1', name: 'echo' });
    await world.dispatcher.call(session, { id: 'm-2', name: 'gated' });
    const calls = await reader.points('matrix.tool.calls');
    const okEcho = calls.find(
      (p) => p.attributes['gen_ai.tool.name'] === 'echo' && p.attributes['matrix.outcome'] === 'ok',
    );
    expect(okEcho?.value).toBeGreaterThanOrEqual(1);
    const denied = calls.find((p) => p.attributes['gen_ai.tool.name'] === 'gated');
    expect(denied?.attributes).toMatchObject({ 'matrix.outcome': 'error', 'error.type': 'approval_denied' });
    const durations = await reader.points('matrix.tool.call.duration');
    expect(durations.find((p) => p.attributes['gen_ai.tool.name'] === 'echo')?.value).toMatchObject({
      count: expect.any(Number),
    });
    const approvals = await reader.points('matrix.approvals');
    expect(approvals.find((p) => p.attributes['matrix.decision'] === 'reject')?.value).toBeGreaterThanOrEqual(1);
  });

  it('reports calls in flight by target from the sources it is given, at collection time', async () => {
    const inFlight = new Map([['app.slow', 3]]);
    const stop = observeInFlight(() => inFlight);
    try {
      expect(await inFlightOf(reader, 'app.slow')).toBe(3);
      inFlight.set('app.slow', 1);
      expect(await inFlightOf(reader, 'app.slow')).toBe(1);
    } finally {
      stop();
    }
  });

  it('reports a target’s calls in flight at 0 once they are done, summed over the dispatchers that call it', async () => {
    const second = new Dispatcher(world.nc, { source: localToolSource(world.registry) });
    try {
      const calls = [world.dispatcher, second].map((d) => d.call(session, { id: 'slow', name: 'slow' }));
      await eventually(() => expect(held.length).toBe(2));
      expect([world.dispatcher.inFlight(T), second.inFlight(T)]).toEqual([1, 1]);
      expect(await inFlightOf(reader, T)).toBe(2);
      for (const release of held.splice(0)) release();
      for (const result of await Promise.all(calls)) expect(result.isError).toBe(false);
      expect(world.dispatcher.inFlight(T)).toBe(0);
      expect(await inFlightOf(reader, T)).toBe(0);
    } finally {
      second.close();
    }
  });

  it('counts hits and misses of the resolution, session and grant caches', async () => {
    const before = await lookups(reader);
    // A session no call has used yet: one miss of the dispatcher's sessions, one of the registry's resolutions.
    const fresh: ResolveRequest = { profile: `cache-${Date.now()}`, toolContextRefs: ['telemetry-test'] };
    await world.dispatcher.call(fresh, { id: 'c-1', name: 'echo' });
    await world.dispatcher.call(fresh, { id: 'c-2', name: 'echo' });
    await world.dispatcher.call({ ...fresh }, { id: 'c-3', name: 'echo' });
    world.registry.resolve(fresh);
    const issuer = createAccount();
    const verifier = new GrantVerifier([issuer.getPublicKey()]);
    const grant = mintGrant(issuer, {
      principal: 'ann',
      session: 's-1',
      resolve: { profile: 'evaluate' },
      ttlSeconds: 60,
    });
    for (let i = 0; i < 3; i++) verifier.verify(grant);
    const after = await lookups(reader);
    const delta = (key: string) => (after.get(key) ?? 0) - (before.get(key) ?? 0);
    expect({
      sessionsMiss: delta('sessions miss'),
      sessionsHit: delta('sessions hit'),
      resolutionsMiss: delta('resolutions miss'),
      resolutionsHit: delta('resolutions hit'),
      grantsMiss: delta('grants miss'),
      grantsHit: delta('grants hit'),
    }).toEqual({ sessionsMiss: 1, sessionsHit: 2, resolutionsMiss: 1, resolutionsHit: 1, grantsMiss: 1, grantsHit: 2 });
  });

  it('makes a span of each $resolve, a child of the request’s traceparent', async () => {
    const mount: Mount = await registryMount(world.nc, { registry: world.registry }).start();
    const client = new BusClient(world.nc);
    const traceparent = newTraceparent();
    await client.request('system.tools', '$resolve', { profile: 'evaluate' }, { traceparent });
    const span = await eventually(
      () => spans.getFinishedSpans().find((s) => s.name === 'resolve_tools evaluate') ?? false,
    );
    expect(span.spanContext().traceId).toBe(traceIdOf(traceparent));
    expect(span.parentSpanContext?.spanId).toBe(traceparent.slice(36, 52));
    client.close();
    await mount.stop();
  });
});

describe('OpenTelemetry with no SDK, and over OTLP', () => {
  let world: Awaited<ReturnType<typeof startWorld>>;
  let receiver: Server;
  const received: { path: string; type: string; body: string }[] = [];

  beforeAll(async () => {
    world = await startWorld();
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        received.push({ path: req.url ?? '', type: String(req.headers['content-type']), body });
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    world.dispatcher.close();
    for (const t of world.targets) t.stop();
    await world.nc.close();
    await world.server.stop();
    await new Promise((resolve) => receiver.close(resolve));
  });

  it('builds nothing while no SDK is registered', async () => {
    expect(activeTracer()).toBeUndefined();
    expect(activeInstruments()).toBeUndefined();
    expect((await world.dispatcher.call(session, { id: 'plain', name: 'echo' })).isError).toBe(false);
  });

  it('sends the execute_tool span to an OTLP/HTTP receiver when an endpoint is set', async () => {
    const endpoint = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    const telemetry = await startTelemetry({ otlpEndpoint: endpoint, exportIntervalMs: 100 });
    // Made after the SDK, as serve makes its own.
    const observed = new Dispatcher(world.nc, { source: localToolSource(world.registry) });
    try {
      const traceparent = newTraceparent();
      await observed.call(session, { id: 'otlp-call', name: 'echo' }, { traceparent });
      const sent = await eventually(
        () => received.find((r) => r.path === '/v1/traces' && r.body.includes('otlp-call')) ?? false,
      );
      expect(sent.type).toContain('json');
      const spans = (JSON.parse(sent.body) as OtlpTraces).resourceSpans.flatMap((r) =>
        r.scopeSpans.flatMap((s) => s.spans),
      );
      const span = spans.find((s) => s.name === 'execute_tool echo');
      expect(span?.traceId).toBe(traceIdOf(traceparent));
      expect(span?.parentSpanId).toBe(traceparent.slice(36, 52));
      expect(span?.attributes).toContainEqual({ key: 'gen_ai.tool.call.id', value: { stringValue: 'otlp-call' } });
    } finally {
      observed.close();
      await telemetry?.shutdown();
    }
  });
});

/** The parts of an OTLP/JSON trace export the test reads. */
interface OtlpTraces {
  resourceSpans: {
    scopeSpans: { spans: { name: string; traceId: string; parentSpanId: string; attributes: unknown[] }[] }[];
  }[];
}
