import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallEvent } from '../../src/audit/events.js';
import { CALL_EVENTS } from '../../src/audit/log.js';
import { BusClient } from '../../src/bus/client.js';
import { decodeBody, Encoding } from '../../src/bus/codec.js';
import type { Progress } from '../../src/bus/context.js';
import { Header, newTraceparent } from '../../src/bus/headers.js';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import type { MatrixToolProjection, ResolveRequest, ToolContextSpec } from '../../src/registry/types.js';
import { testConnection, uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { staticRegistry } from '../harness/registry.js';
import { type SlowMount, startSlowMount } from '../harness/slow-mount.js';
import { silence, startTarget, type Target } from '../harness/targets.js';

const SLOW = uniqueMount('slow');
/** A target that never answers `$stall` and has no `$cancel` of its own: it is told once and left alone. */
const DEAF = uniqueMount('deaf');
const tool = (name: string, target: string, op: string, extra: Partial<MatrixToolProjection> = {}) => ({
  name,
  description: `${name} for tests`,
  inputSchema: { type: 'object' as const },
  target,
  op,
  ...extra,
});
const spec: ToolContextSpec = {
  key: 'cancel-test',
  title: 'Cancel test',
  description: 'slow tools',
  matrixTools: [tool('work', SLOW, '$work', { timeoutMs: 10_000 }), tool('stall', DEAF, '$stall', { timeoutMs: 300 })],
  permissions: { approval: 'never' },
};
const session: ResolveRequest = { profile: 'test', toolContextRefs: ['cancel-test'] };

describe('progress and cancellation through the dispatcher', () => {
  let nc: NatsConnection;
  let registry: Mount;
  let slow: SlowMount;
  let deaf: Target;
  let dispatcher: Dispatcher;
  let mount: Mount;
  let client: BusClient;
  const events: CallEvent[] = [];

  beforeAll(async () => {
    nc = await testConnection();
    registry = await staticRegistry(nc, spec);
    slow = await startSlowMount(nc, SLOW);
    deaf = await startTarget(nc, DEAF, { $stall: () => silence });
    dispatcher = new Dispatcher(nc);
    mount = await dispatcherMount(nc, { dispatcher }).start();
    client = new BusClient(nc, { timeoutMs: 10_000 });
    nc.subscribe(CALL_EVENTS, {
      callback: (_err, msg) => {
        for (const e of decodeBody(msg.data, Encoding.MsgPack) as CallEvent[]) events.push(e);
      },
    });
  });

  afterAll(async () => {
    client.close();
    await mount.stop();
    dispatcher.close();
    await slow.stop();
    deaf.stop();
    await registry.stop();
  });

  it('sends every request to a target with a Matrix-Call-Id of its own', async () => {
    await dispatcher.call(session, { id: 'c1', name: 'stall', arguments: {} });
    await dispatcher.call(session, { id: 'c2', name: 'stall', arguments: {} });
    const ids = deaf.seen.filter((s) => s.op === '$stall').map((s) => s.headers[Header.CallId]);
    expect(ids).toHaveLength(2);
    expect(ids[0]).toMatch(/^[A-Za-z0-9_-]{16}$/);
    expect(ids[1]).not.toBe(ids[0]);
  });

  it("tells a target whose caller's deadline passed to stop, once, with the call's context, and a mount without $cancel is left alone", async () => {
    const traceparent = newTraceparent();
    const result = await dispatcher.call(session, { id: 'c3', name: 'stall', arguments: {} }, { traceparent });
    expect(result.error?.code).toBe('timeout');
    const ofThisCall = (op: string) => deaf.seen.filter((s) => s.op === op && s.headers.traceparent === traceparent);
    await eventually(() => expect(ofThisCall('$cancel')).toHaveLength(1));
    const [sent] = ofThisCall('$stall');
    expect(ofThisCall('$cancel')[0]?.args).toEqual({ callId: sent?.headers[Header.CallId] });
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(ofThisCall('$cancel')).toHaveLength(1);
  });

  it('cancels a call on its signal: the mount stops, the result and the audit say cancelled', async () => {
    const controller = new AbortController();
    const stoppedBefore = slow.stopped.length;
    const call = dispatcher.call(
      session,
      { id: 'c-cancel', name: 'work', arguments: { steps: 100, stepMs: 50 } },
      {},
      { signal: controller.signal },
    );
    await eventually(() => expect(slow.started).toBeGreaterThan(0));
    controller.abort();
    const result = await call;
    expect(result.isError).toBe(true);
    expect(result.error?.code).toBe('cancelled');
    await eventually(() => expect(slow.stopped.slice(stoppedBefore)).toEqual(['CancelledError']));
    const event = await eventually(() => events.find((e) => e.callId === 'c-cancel') ?? false);
    expect(event.outcome).toBe('cancelled');
  });

  it("relays a target's progress to a $call caller that takes it, and cancels it by system.dispatcher.$cancel", async () => {
    const seen: Progress[] = [];
    const done = (await client.request(
      'system.dispatcher',
      '$call',
      { session, call: { id: 'c-progress', name: 'work', arguments: { steps: 3, stepMs: 150 } } },
      { onProgress: (p) => seen.push(p) },
    )) as ToolResult;
    expect(done.content).toBe('{"done":3}');
    expect(seen.map((p) => p.progress)).toEqual([1, 2, 3]);

    const stoppedBefore = slow.stopped.length;
    const callId = 'bridge-call-1';
    const call = client.request<ToolResult>(
      'system.dispatcher',
      '$call',
      { session, call: { id: 'c-remote', name: 'work', arguments: { steps: 100, stepMs: 50 } } },
      { callId },
    );
    await eventually(() => expect(slow.started).toBeGreaterThan(2));
    expect(await client.request('system.dispatcher', '$cancel', { callId })).toEqual({ cancelled: true });
    expect((await call).error?.code).toBe('cancelled');
    await eventually(() => expect(slow.stopped.slice(stoppedBefore)).toEqual(['CancelledError']));
  });
});
