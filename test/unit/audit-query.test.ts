import { describe, expect, it } from 'vitest';
import type { CallEvent } from '../../src/audit/events.js';
import { type BatchSource, queryBatches, SCAN_BUDGET, TRACE_BUDGET, type TraceQuery } from '../../src/audit/query.js';
import type { StoredBatch } from '../../src/audit/stream.js';

const T0 = Date.parse('2026-03-01T00:00:00Z');
const trace = (n: number) => n.toString(16).padStart(32, '0');

/** A stream in memory: `batches` batches of `size` events, batch s stored at T0 + s seconds; counts reads. */
class MemorySource implements BatchSource {
  readonly stored: StoredBatch[] = [];
  reads = 0;
  /** Which batches hold each trace, as the indexer would have written. */
  readonly index = new Map<string, number[]>();

  constructor(
    batches: number,
    size: number,
    eventOf: (seq: number, i: number) => Partial<CallEvent> = () => ({}),
    public indexed = batches,
  ) {
    for (let seq = 1; seq <= batches; seq++) {
      const events = Array.from({ length: size }, (_, i) => ({
        callId: `${seq}.${i}`,
        name: 'tool',
        outcome: 'ok' as const,
        durationMs: 1,
        at: new Date(T0 + seq * 1000 - size + i).toISOString(),
        ...eventOf(seq, i),
      }));
      this.stored.push({ seq, time: T0 + seq * 1000, events });
      for (const e of events) {
        const id = e.traceparent?.slice(3, 35);
        if (id !== undefined && seq <= indexed) this.index.set(id, [...new Set([...(this.index.get(id) ?? []), seq])]);
      }
    }
  }

  async bounds() {
    return { first: 1, last: this.stored.length, messages: this.stored.length };
  }
  async batch(seq: number) {
    this.reads++;
    return this.stored[seq - 1] ?? null;
  }
  async batchesOf(traceId: string) {
    return this.index.get(traceId) ?? [];
  }
  async indexedThrough() {
    return this.indexed;
  }
}

/** A stream whose indexer indexes (and acknowledges) every batch the moment its index has been read; its ack floor answers later than its index. */
class CatchingUp extends MemorySource {
  override async batchesOf(traceId: string) {
    const seqs = await super.batchesOf(traceId);
    for (const batch of this.stored) {
      for (const e of batch.events) {
        const id = e?.traceparent?.slice(3, 35);
        if (id !== undefined) this.index.set(id, [...new Set([...(this.index.get(id) ?? []), batch.seq])]);
      }
    }
    this.indexed = this.stored.length;
    return seqs;
  }
  override async indexedThrough() {
    await new Promise((resolve) => setImmediate(resolve));
    return this.indexed;
  }
}

/** Every event of the source, newest first, that `keep` keeps. */
const newestFirst = (source: MemorySource, keep: (e: CallEvent) => boolean = () => true) =>
  source.stored
    .flatMap((b) => b.events as CallEvent[])
    .filter(keep)
    .reverse()
    .map((e) => e.callId);

async function pages(source: BatchSource, q: TraceQuery): Promise<string[][]> {
  const all: string[][] = [];
  let cursor: string | undefined;
  do {
    const reply = await queryBatches(source, { ...q, ...(cursor === undefined ? {} : { cursor }) });
    all.push(reply.events.map((e) => e.callId));
    cursor = reply.next;
  } while (cursor !== undefined);
  return all;
}

describe('queries over the durable audit stream', () => {
  it('answers an empty page from an empty stream without reading sequence 0', async () => {
    const empty: BatchSource = {
      bounds: async () => ({ first: 0, last: 0, messages: 0 }),
      batch: async (seq) => {
        throw new Error(`read ${seq}`);
      },
      batchesOf: async () => [],
      indexedThrough: async () => 0,
    };
    expect(await queryBatches(empty, { limit: 5 })).toEqual({ events: [], matched: 0, kept: 0 });
    expect(await queryBatches(empty, { traceId: trace(1), until: new Date().toISOString() })).toEqual({
      events: [],
      matched: 0,
      kept: 0,
    });
  });

  it('reads at most TRACE_BUDGET batches a page by trace id, and pages on (a flooded trace id must not stall the service)', async () => {
    const flooded = trace(7);
    const source = new MemorySource(3_000, 1, () => ({ traceparent: `00-${flooded}-0000000000000001-01` }));
    const first = await queryBatches(source, { traceId: flooded, outcome: 'error' });
    expect(first.events).toEqual([]);
    expect(first.next).toBeDefined();
    expect(source.reads).toBeLessThanOrEqual(TRACE_BUDGET + 32);
    const none = await pages(source, { traceId: flooded, outcome: 'error' });
    expect(none.flat()).toEqual([]);
    expect(none.length).toBeGreaterThanOrEqual(3);
    expect((await pages(source, { traceId: flooded, limit: 500 })).flat()).toEqual(newestFirst(source));
  });

  it('reports how many batches a scan read, and stops between windows once its signal fires', async () => {
    const source = new MemorySource(5_000, 1);
    const reported: Array<[number, number]> = [];
    const controller = new AbortController();
    const scan = queryBatches(
      source,
      { tool: 'no-such-tool' },
      {
        signal: controller.signal,
        progress: (read, budget) => {
          reported.push([read, budget]);
          if (read >= 64) controller.abort(new Error('cancelled by its caller'));
        },
      },
    );
    await expect(scan).rejects.toThrow('cancelled by its caller');
    expect(reported).toEqual([
      [32, SCAN_BUDGET],
      [64, SCAN_BUDGET],
    ]);
    expect(source.reads).toBeLessThan(100);
  });

  it('pages newest first across batch boundaries, each event once', async () => {
    const source = new MemorySource(10, 7);
    const got = await pages(source, { limit: 5 });
    expect(got.flat()).toEqual(newestFirst(source));
    expect(got.slice(0, -1).every((p) => p.length === 5)).toBe(true);
  });

  it('finds the start of an until window by bisection, not by reading every newer batch', async () => {
    const source = new MemorySource(100_000, 2);
    const until = new Date(T0 + 500 * 1000).toISOString();
    const reply = await queryBatches(source, { until, limit: 3 });
    expect(reply.events.map((e) => e.callId)).toEqual(newestFirst(source, (e) => e.at < until).slice(0, 3));
    expect(source.reads).toBeLessThan(100);
  });

  it('stops at the first batch stored before since', async () => {
    const source = new MemorySource(10_000, 2);
    const since = new Date(T0 + 9_990 * 1000).toISOString();
    const reply = await queryBatches(source, { since, limit: 500 });
    expect(reply.events.map((e) => e.callId)).toEqual(newestFirst(source, (e) => e.at >= since));
    expect(reply.next).toBeUndefined();
    expect(source.reads).toBeLessThan(100);
  });

  it('reads a bounded number of batches per page and hands back a cursor that goes on', async () => {
    const source = new MemorySource(SCAN_BUDGET * 2 + 10, 1, (seq) => ({ name: seq === 5 ? 'rare' : 'tool' }));
    const first = await queryBatches(source, { tool: 'rare' });
    expect(first.events).toEqual([]);
    expect(first.next).toBeDefined();
    expect(source.reads).toBeLessThanOrEqual(SCAN_BUDGET);
    expect((await pages(source, { tool: 'rare' })).flat()).toEqual(['5.0']);
  });

  it('by trace id reads only the indexed batches and those past the index, and finds events not indexed yet', async () => {
    const id = trace(42);
    const source = new MemorySource(
      41_000,
      4,
      (seq, i) => ({
        traceparent: `00-${seq % 10_000 === 7 && i === 1 ? id : trace(seq * 4 + i + 1000)}-0000000000000001-01`,
      }),
      40_000,
    );
    const reply = await queryBatches(source, { traceId: id });
    expect(reply.events.map((e) => e.callId)).toEqual(['40007.1', '30007.1', '20007.1', '10007.1', '7.1']);
    expect(source.index.get(id)).toHaveLength(4);
    // The four indexed batches and the thousand stored since the index's ack floor, among them the newest match.
    expect(source.reads).toBe(4 + 1000);
  });
});

describe('queries by trace id while the indexer lags', () => {
  const id = trace(42);
  const ofTrace = (at: number[]) => (seq: number) => ({
    traceparent: `00-${at.includes(seq) ? id : trace(seq + 1000)}-0000000000000001-01`,
  });

  it('finds a batch stored more than a page of batches past the ack floor, on a later page', async () => {
    // The indexing instance is down: the floor is 2,500 batches behind, the trace's batch 1,100 below the newest.
    const source = new MemorySource(3_000, 1, ofTrace([1_900]), 500);
    const first = await queryBatches(source, { traceId: id });
    expect(first.events).toEqual([]);
    expect(first.next).toBeDefined();
    expect(source.reads).toBeLessThanOrEqual(TRACE_BUDGET);
    expect((await pages(source, { traceId: id })).flat()).toEqual(['1900.0']);
  });

  it('pages newest first through the batches past the floor and then the indexed ones, each event once', async () => {
    const at = [3, 400, 800, 1_200, 2_100, 2_500, 2_999];
    const source = new MemorySource(3_000, 1, ofTrace(at), 1_000);
    expect(source.index.get(id)).toEqual([3, 400, 800]);
    const got = await pages(source, { traceId: id, limit: 2 });
    expect(got.flat()).toEqual(newestFirst(source, (e) => e.traceparent?.includes(id) === true));
    expect(got.flat()).toHaveLength(at.length);
  });

  it('finds a batch indexed between two pages of a query', async () => {
    const source = new MemorySource(3_000, 1, ofTrace([1_500]), 0);
    const first = await queryBatches(source, { traceId: id });
    expect(first.next).toBeDefined();
    // The indexer catches up: everything is indexed before the next page is asked for.
    source.index.set(id, [1_500]);
    source.indexed = 3_000;
    const rest = await pages(source, { traceId: id, cursor: first.next });
    expect([...first.events.map((e) => e.callId), ...rest.flat()]).toEqual(['1500.0']);
  });

  it('reads the ack floor before the index, so a batch indexed while the query reads is not missed', async () => {
    const source = new CatchingUp(100, 1, ofTrace([60]), 50);
    expect((await queryBatches(source, { traceId: id })).events.map((e) => e.callId)).toEqual(['60.0']);
  });
});
