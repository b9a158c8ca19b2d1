import { describe, expect, it } from 'vitest';
import { isTraceId, PendingEntries, SHARDS, seqsIn, shardOf, shardSubject } from '../../src/mounts/audit-index.js';

const id = (n: number) => n.toString(16).padStart(32, '0');

describe('the trace-id index: shards and entries', () => {
  it('puts every trace id in one of SHARDS shards by its first hex digits', () => {
    expect(shardOf('fff0000000000000000000000000000a')).toBe(0xfff % SHARDS);
    expect(shardOf(id(1))).toBe(0);
    const used = new Set(Array.from({ length: 4096 }, (_, i) => shardOf(i.toString(16).padStart(3, '0') + '0'.repeat(29))));
    expect(used.size).toBe(SHARDS);
    expect(shardSubject('MATRIX_AUDIT', 7)).toBe('system.dispatcher.audit.MATRIX_AUDIT.7');
    expect(isTraceId(id(5))).toBe(true);
    expect(isTraceId('0123')).toBe(false);
    expect(isTraceId(`${id(5).slice(1)}G`)).toBe(false);
  });

  it('writes one message per shard, listing each batch once, split past the size bound, and reads back what it wrote', () => {
    const pending = new PendingEntries();
    const ids = Array.from({ length: 300 }, (_, i) => `abc${i.toString(16).padStart(29, '0')}`);
    pending.add(ids, 10);
    pending.add(ids.slice(0, 5), 11);
    pending.add(ids.slice(0, 5), 11);
    expect(pending.size).toBe(1);
    const whole = pending.messages('S');
    expect(whole).toHaveLength(1);
    expect(whole[0]?.subject).toBe(shardSubject('S', shardOf(ids[0] as string)));
    const split = pending.messages('S', 1_000);
    expect(split.length).toBeGreaterThan(10);
    for (const m of split) expect(m.data.length).toBeLessThanOrEqual(1_000);
    const read = (traceId: string, messages: { data: Uint8Array }[]) => messages.flatMap((m) => seqsIn(m.data, traceId));
    expect(read(ids[0] as string, whole)).toEqual([10, 11]);
    expect(read(ids[0] as string, split)).toEqual([10, 11]);
    expect(read(ids[299] as string, split)).toEqual([10]);
    expect(read(id(7), split)).toEqual([]);
  });

  it('reads only positive whole sequences of the trace asked, and nothing from a message it cannot parse', () => {
    const t = id(9);
    expect(seqsIn(Buffer.from(`{"${t}":[3,-1,0,2.5,"4",9007199254740993,5]}`), t)).toEqual([3, 5]);
    expect(seqsIn(Buffer.from(`{"${t}":[3`), t)).toEqual([]);
    expect(seqsIn(Buffer.from(`{"${t}":{"a":1}}`), t)).toEqual([]);
    expect(seqsIn(Buffer.from(`{"${id(8)}":[1]}`), t)).toEqual([]);
  });
});
