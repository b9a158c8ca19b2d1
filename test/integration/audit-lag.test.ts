import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallEvent } from '../../src/audit/events.js';
import { INDEXER } from '../../src/audit/indexer.js';
import { AuditLog } from '../../src/audit/log.js';
import { queryBatches, TRACE_BUDGET, type TraceQuery, type TraceQueryReply } from '../../src/audit/query.js';
import { AuditStream } from '../../src/audit/stream.js';
import { connectBus } from '../../src/bus/connect.js';
import { UnavailableError } from '../../src/bus/errors.js';
import { newTraceparent, traceIdOf } from '../../src/bus/headers.js';
import { eventually } from '../harness/eventually.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';

/** One call of a trace, as a dispatcher records it. */
const call = (callId: string, traceparent: string): CallEvent => ({
  callId,
  name: 'tool',
  outcome: 'ok',
  durationMs: 1,
  attempts: 1,
  at: new Date().toISOString(),
  session: 's',
  principal: 'p',
  traceparent,
});

/** Every page of a query, followed by its cursors. */
async function allPages(audit: AuditStream, q: TraceQuery): Promise<{ events: CallEvent[]; first: TraceQueryReply }> {
  const first = await queryBatches(audit, q);
  const events = [...first.events];
  for (let reply = first; reply.next !== undefined; ) {
    reply = await queryBatches(audit, { ...q, cursor: reply.next });
    events.push(...reply.events);
  }
  return { events, first };
}

describe('queries by trace id while no instance indexes the trail', () => {
  let server: ProcessNats;
  let nc: NatsConnection;

  beforeAll(async () => {
    server = await startNatsProcess();
    nc = await connectBus({ servers: server.url });
  });
  afterAll(async () => {
    await nc.close();
    await server.stop();
  });

  it('finds a batch stored more than a page of batches past the ack floor by following next', async () => {
    // The trail and the indexer's consumer exist, but the instance that indexes is down.
    const audit = await AuditStream.open(nc, { stream: 'LAG_TEST' });
    const log = new AuditLog(nc);
    const victim = newTraceparent();
    log.record(call('victim', victim));
    log.flush();
    const later = TRACE_BUDGET + 100;
    for (let i = 0; i < later; i++) {
      log.record(call(`other-${i}`, newTraceparent()));
      log.flush();
    }
    await eventually(async () => expect((await audit.bounds()).messages).toBe(later + 1), { timeoutMs: 20_000 });
    expect(await audit.indexedThrough()).toBe(0);

    const { events, first } = await allPages(audit, { traceId: traceIdOf(victim) as string });
    expect(first.next).toBeDefined();
    expect(events.map((e) => e.callId)).toEqual(['victim']);
  }, 60_000);

  it('fails unavailable when the ack floor cannot be read, and makes the consumer again', async () => {
    const audit = await AuditStream.open(nc, { stream: 'LAG_TEST' });
    const traceId = traceIdOf(newTraceparent()) as string;
    expect(await queryBatches(audit, { traceId })).toMatchObject({ events: [] });
    // Without the consumer the floor is unknown: the query says so rather than guess.
    await (await jetstreamManager(nc)).consumers.delete('LAG_TEST', INDEXER);
    await expect(queryBatches(audit, { traceId })).rejects.toBeInstanceOf(UnavailableError);
    await eventually(async () => expect(await audit.indexedThrough()).toBe(0));
  }, 60_000);
});
