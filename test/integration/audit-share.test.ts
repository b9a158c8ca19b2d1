/**
 * Each principal has a share of the audit trail's bytes: one agent's flood of calls that reach
 * a target is stored whole, but past its share in the overflow stream, so it cannot push
 * another agent's earlier events out of the trail, and both are found by trace id afterwards.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallEvent } from '../../src/audit/events.js';
import { watchCalls } from '../../src/audit/log.js';
import { queryBatches, queryTrail, type TraceQueryReply } from '../../src/audit/query.js';
import { trailShareOf } from '../../src/audit/share.js';
import type { AuditStream } from '../../src/audit/stream.js';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import { newTraceparent, traceIdOf } from '../../src/bus/headers.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { localToolSource } from '../../src/dispatcher/session-cache.js';
import { durableTracesMount } from '../../src/reference-mounts/traces.js';
import { Registry } from '../../src/registry/registry.js';
import { StaticStore } from '../../src/registry/store.js';
import type { ResolveRequest } from '../../src/registry/types.js';
import { eventually } from '../harness/eventually.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { startTarget, type Target } from '../harness/targets.js';

const TARGET = 'app.share';
/** The trail: 2 MiB, so a flood of ~9,000 calls of ~500 bytes fills it twice over. */
const MAX_BYTES = 2 * 1024 * 1024;
const OVERFLOW_BYTES = 1024 * 1024;
const FLOOD = 9_000;
const VICTIM_CALLS = 10;
const session: ResolveRequest = { profile: 'test', toolContextRefs: ['share-test'] };

describe("the audit trail under one principal's flood", () => {
  let server: ProcessNats;
  let nc: NatsConnection;
  let target: Target;
  let dispatcher: Dispatcher;
  let audit: AuditStream;
  let stop: () => void = () => {};
  let stopWatching: () => void = () => {};
  const published: CallEvent[] = [];

  beforeAll(async () => {
    server = await startNatsProcess();
    nc = await connectBus({ servers: server.url });
    const store = new StaticStore(
      [
        {
          spec: {
            key: 'share-test',
            title: 'Share test',
            description: 'a tool that reaches a target',
            permissions: { approval: { tools: [] } },
            matrixTools: [
              { name: 'echo', description: 'echo', inputSchema: { type: 'object' }, target: TARGET, op: '$echo' },
            ],
          },
          source: 'registered' as const,
          revision: 1,
        },
      ],
      1,
    );
    stopWatching = watchCalls(nc, (e) => published.push(e));
    target = await startTarget(nc, TARGET, { $echo: () => ({ ok: true }) });
    const traces = await durableTracesMount(nc, {
      stream: 'SHARE_TEST',
      maxBytes: MAX_BYTES,
      overflowBytes: OVERFLOW_BYTES,
    });
    await traces.mount.start();
    stop = () => {
      traces.stop();
      void traces.mount.stop();
    };
    audit = traces.audit as AuditStream;
    dispatcher = new Dispatcher(nc, {
      source: localToolSource(new Registry(store)),
      trailShare: trailShareOf(MAX_BYTES, 7 * 86_400_000),
    });
  });
  afterAll(async () => {
    dispatcher.close();
    stopWatching();
    target.stop();
    stop();
    await nc.close();
    await server.stop();
  });

  it("keeps a victim's earlier events in the trail and finds them by trace id; the flood is stored in the overflow", async () => {
    const victimTrace = newTraceparent();
    for (let i = 0; i < VICTIM_CALLS; i++) {
      const result = await dispatcher.call(
        session,
        { id: `victim-${i}`, name: 'echo' },
        { principal: 'agent:victim', traceparent: victimTrace },
      );
      expect(result).toMatchObject({ isError: false });
    }
    // ~500 bytes an event: a long principal and call id, as an agent may choose them.
    const flooder = `agent:flood-${'f'.repeat(200)}`;
    const floodTrace = newTraceparent();
    const lastTrace = newTraceparent();
    for (let from = 0; from < FLOOD; from += 100) {
      await Promise.all(
        Array.from({ length: 100 }, (_, k) => {
          const i = from + k;
          return dispatcher.call(
            session,
            { id: `flood-${String(i).padStart(150, '0')}`, name: 'echo' },
            { principal: flooder, traceparent: i === FLOOD - 1 ? lastTrace : floodTrace },
          );
        }),
      );
    }
    expect(target.count('$echo')).toBe(VICTIM_CALLS + FLOOD);

    const client = new BusClient(nc, { timeoutMs: 20_000 });
    // Every flood call's event went out; the few within its burst to the trail, the rest to the overflow.
    await eventually(() => expect(published.filter((e) => e.principal === flooder)).toHaveLength(FLOOD));
    const lastFlood = `flood-${String(FLOOD - 1).padStart(150, '0')}`;
    // Once the flood's last call is stored (it is past the share: in the overflow)...
    const last = await eventually(
      async () => {
        const found = await allPages(client, traceIdOf(lastTrace) as string);
        expect(found.map((e) => e.callId)).toEqual([lastFlood]);
        return found;
      },
      { timeoutMs: 30_000 },
    );
    // ...nothing was pushed out of the trail: its first batch is still the first one stored,
    // and the victim's calls are found by trace id in it.
    expect((await audit.bounds()).first).toBe(1);
    const victimId = traceIdOf(victimTrace) as string;
    await eventually(async () => {
      expect((await queryBatches(audit, { traceId: victimId })).events).toHaveLength(VICTIM_CALLS);
    });
    // The trail took no more of the flood than its burst (1/256 of the trail: 8 KiB, ~16 events).
    const inTrail = await countEvents(audit, flooder);
    expect(inTrail).toBeGreaterThan(0);
    expect(inTrail).toBeLessThan(40);
    // The overflow holds the flood's newest MiB, and only the flood pushed out the flood.
    const overflow = await audit.overflow.bounds();
    const fromOverflow = await queryBatches(audit.overflow, { traceId: traceIdOf(lastTrace) as string });
    expect(fromOverflow.events.map((e) => e.callId)).toEqual([lastFlood]);
    // It filled and dropped its oldest batches (JetStream keeps what fits its bytes, whole batches
    // only, so how many events stay depends on how the flushes cut the flood), and every event it
    // holds is the flood's: the flood pushed out only the flood.
    expect(overflow.first).toBeGreaterThan(1);
    const held = await countEvents(audit.overflow, flooder);
    expect(held).toBeGreaterThan(0);
    expect(held).toBe(await countEvents(audit.overflow));
    expect(last[0]?.principal).toBe(flooder);
    const page = await queryTrail(audit, { principal: flooder, limit: 100 }, {});
    expect(page.events).toHaveLength(100);

    // Over the bus, as trace_query asks: the victim's calls, and the flood's last one from the overflow.
    const victim = await client.request<TraceQueryReply>('system.traces', '$query', { traceId: victimId });
    expect(victim.events.map((e) => e.callId).sort()).toEqual(
      Array.from({ length: VICTIM_CALLS }, (_, i) => `victim-${i}`).sort(),
    );
    client.close();
  }, 120_000);
});

/** Events of `principal` (of anyone, without one) in every batch of a stream. */
async function countEvents(source: AuditStream | AuditStream['overflow'], principal?: string): Promise<number> {
  const { first, last, messages } = await source.bounds();
  if (messages === 0) return 0;
  let count = 0;
  for (let seq = first; seq <= last; seq++) {
    const batch = await source.batch(seq);
    for (const e of batch?.events ?? [])
      if (e !== undefined && (principal === undefined || e.principal === principal)) count++;
  }
  return count;
}

/** Every page of a `$query` by trace id, following its cursors (into the overflow). */
async function allPages(client: BusClient, traceId: string): Promise<CallEvent[]> {
  const events: CallEvent[] = [];
  let next: string | undefined;
  do {
    const reply: TraceQueryReply = await client.request<TraceQueryReply>('system.traces', '$query', {
      traceId,
      ...(next === undefined ? {} : { cursor: next }),
    });
    events.push(...reply.events);
    next = reply.next;
  } while (next !== undefined);
  return events;
}
