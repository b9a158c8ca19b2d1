import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { encode } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { type CallEvent, encodeCallEvents, traceIdsOfBatch } from '../../src/audit/events.js';
import { encodeEntries, mergeEntries, PendingEntries, seqsIn } from '../../src/audit/index-entries.js';
import { isTraceId, SHARDS, Shards } from '../../src/audit/shards.js';
import { newTraceparent, traceIdOf } from '../../src/bus/headers.js';
import {
  indexLevelOf,
  indexStreamName,
  overflowStreamName,
  indexShardSubject as shardSubject,
} from '../../src/bus/subjects.js';

const id = (n: number) => n.toString(16).padStart(32, '0');

/** A stored call's event, without its trace. */
const callEvent = (i: number): CallEvent => ({
  callId: `c${i}`,
  name: 'echo',
  target: 'app.x',
  op: '$run',
  session: 's',
  principal: 'p',
  outcome: 'ok',
  durationMs: 1,
  attempts: 1,
  at: new Date(0).toISOString(),
});

describe('the trace-id index: shards and entries', () => {
  it('spreads trace ids over SHARDS shards by a keyed hash: the same for one key, another for another key', () => {
    const shards = Shards.create();
    const again = Shards.fromDescription(shards.describe('MATRIX_AUDIT'));
    const other = Shards.create();
    const ids = Array.from({ length: 20_000 }, (_, i) => id(i));
    const used = new Set(ids.map((t) => shards.of(t)));
    expect(used.size).toBe(SHARDS);
    expect(ids.every((t) => again.of(t) === shards.of(t))).toBe(true);
    // A caller who picks trace ids with the same first digits (one shard by digits) lands everywhere.
    const sameDigits = Array.from({ length: 2_000 }, (_, i) => `abc${i.toString(16).padStart(29, '0')}`);
    expect(new Set(sameDigits.map((t) => shards.of(t))).size).toBeGreaterThan(200);
    expect(ids.filter((t) => other.of(t) === shards.of(t)).length).toBeLessThan(200);
    expect(shardSubject('MATRIX_AUDIT', 7)).toBe('system.dispatcher.audit.MATRIX_AUDIT.7.0');
    expect(shardSubject('MATRIX_AUDIT', 7, 2)).toBe('system.dispatcher.audit.MATRIX_AUDIT.7.2');
    expect(indexLevelOf(shardSubject('MATRIX_AUDIT', 7))).toBe(0);
    expect(indexLevelOf(shardSubject('MATRIX_AUDIT', 7, 12))).toBe(12);
    expect(indexLevelOf('system.dispatcher.audit.MATRIX_AUDIT.7.top')).toBeUndefined();
    expect(indexStreamName('MATRIX_AUDIT')).toBe('MATRIX_AUDIT_INDEX');
    expect(overflowStreamName('MATRIX_AUDIT')).toBe('MATRIX_AUDIT_OVERFLOW');
    expect(isTraceId(id(5))).toBe(true);
    expect(isTraceId('0123')).toBe(false);
    expect(isTraceId(`${id(5).slice(1)}G`)).toBe(false);
  });

  it('spreads trace ids that differ in a few digits over the shards for every key, not only for most', () => {
    // CI once drew a key under which 2,000 such ids met 125 of the 256 shards (plain
    // multiply-shift keeps the low bits' structure): 300 keys, each must spread them.
    const sameDigits = Array.from({ length: 2_000 }, (_, i) => `abc${i.toString(16).padStart(29, '0')}`);
    const counter = Array.from({ length: 2_000 }, (_, i) => `${i.toString(16).padStart(8, '0')}${'0'.repeat(24)}`);
    const spread = (s: Shards, ids: string[]) => new Set(ids.map((t) => s.of(t))).size;
    for (let k = 0; k < 300; k++) {
      const shards = Shards.create();
      expect(spread(shards, sameDigits)).toBeGreaterThan(230);
      expect(spread(shards, counter)).toBeGreaterThan(230);
    }
  });

  it('writes one message per shard, listing each batch once, split past the size bound, and reads back what it wrote', () => {
    const shards = Shards.fromDescription('shard key 0123456789abcdef0123456789abcdef');
    const pending = new PendingEntries(shards);
    const first = id(1);
    const ids = Array.from({ length: 20_000 }, (_, i) => id(i))
      .filter((t) => shards.of(t) === shards.of(first))
      .slice(0, 15);
    pending.add(ids, 10);
    pending.add(ids.slice(0, 5), 11);
    pending.add(ids.slice(0, 5), 11);
    expect(pending.size).toBe(1);
    const whole = pending.messages('S');
    expect(whole).toHaveLength(1);
    expect(whole[0]?.subject).toBe(shardSubject('S', shards.of(first)));
    const split = pending.messages('S', 120);
    expect(split.length).toBeGreaterThan(5);
    for (const m of split) expect(m.data.length).toBeLessThanOrEqual(120);
    const read = (traceId: string, messages: { data: Uint8Array }[]) =>
      messages.flatMap((m) => seqsIn(m.data, traceId));
    expect(read(ids[0] as string, whole)).toEqual([10, 11]);
    expect(read(ids[0] as string, split)).toEqual([10, 11]);
    expect(read(ids[14] as string, split)).toEqual([10]);
    expect(read(id(7), split)).toEqual([]);
  });

  it('lists a batch read from its bytes as its trace ids would be: each batch once per trace, however often it comes', () => {
    const shards = Shards.create();
    const traceparents = Array.from({ length: 2025 }, () => newTraceparent());
    const event = (i: number): CallEvent => ({ ...callEvent(i), traceparent: traceparents[i] });
    // 40 batches of 100 events, each of 75 traces (25 of them twice), the next 50 on: a trace is
    // in one batch or in two.
    const batches = Array.from({ length: 40 }, (_, b) =>
      encodeCallEvents(Array.from({ length: 100 }, (_, i) => event(b * 50 + (i % 75)))),
    );
    const fromBytes = new PendingEntries(shards);
    const fromIds = new PendingEntries(shards);
    batches.forEach((batch, b) => {
      fromBytes.addBatch(batch, b + 1);
      fromIds.add(traceIdsOfBatch(batch), b + 1);
    });
    // Delivered again (a redelivery after a failed flush): nothing new.
    fromBytes.addBatch(batches[3] as Uint8Array, 4);
    const entries = (p: PendingEntries) =>
      mergeEntries(
        p.messages('S').map((m) => m.data),
        1,
      );
    const read = entries(fromBytes);
    expect(read).toEqual(entries(fromIds));
    expect(read.size).toBe(2025);
    const seqsOf = (t: string) => [...(read.get(traceIdOf(t) as string) ?? [])];
    expect(seqsOf(traceparents[0] as string)).toEqual([1]);
    expect(seqsOf(traceparents[60] as string)).toEqual([1, 2]);
    expect(seqsOf(traceparents[2024] as string)).toEqual([40]);
  });

  it('finds every trace of a shard again as its entries grow past what they first made room for', () => {
    const shards = Shards.create();
    const ids = Array.from({ length: 600_000 }, (_, i) => id(i)).filter((t) => shards.of(t) === shards.of(id(0)));
    expect(ids.length).toBeGreaterThan(1500);
    const pending = new PendingEntries(shards);
    pending.add(ids, 1);
    pending.add(ids.slice(0, 100), 2);
    pending.add(ids, 1);
    const read = mergeEntries(
      pending.messages('S').map((m) => m.data),
      1,
    );
    expect(read.size).toBe(ids.length);
    expect(ids.every((t, i) => [...(read.get(t) ?? [])].join() === (i < 100 ? '1,2' : '1'))).toBe(true);
  });

  it('lists only trace ids: a string of another length or alphabet is skipped, not read past its end', () => {
    const shards = Shards.fromDescription('');
    const valid = 'abcdef0123456789'.repeat(2);
    // Strings in the valid id's shard, so that they would share its message and its probe chain.
    const short = Array.from({ length: 2_000 }, (_, i) => `s${i}`).filter((t) => shards.of(t) === shards.of(valid));
    const others = [...short.slice(0, 3), `${valid}0`, valid.toUpperCase(), `${valid.slice(0, 31)}"`, ''];
    expect(short.length).toBeGreaterThan(0);
    const pending = new PendingEntries(shards);
    expect(() => pending.add([...others, valid, ...others], 7)).not.toThrow();
    pending.add(others, 9);
    const messages = pending.messages('S');
    expect(messages.map((m) => Object.keys(JSON.parse(new TextDecoder().decode(m.data))))).toEqual([[valid]]);
    expect([
      ...(mergeEntries(
        messages.map((m) => m.data),
        1,
      ).get(valid) ?? []),
    ]).toEqual([7]);
  });

  it('holds pending entries off the heap the collector walks, not a string and a map entry per trace', () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const pending = new PendingEntries(Shards.create());
    const add = (from: number, count: number) => {
      for (let at = from; at < from + count; at += 500)
        pending.addBatch(
          encodeCallEvents(
            Array.from({ length: 500 }, (_, i) => ({ ...callEvent(at + i), traceparent: newTraceparent() })),
          ),
          at,
        );
    };
    // The shards' buffers and arrays are made by the first traces; what grows after is per trace.
    add(0, 20_000);
    gc();
    const before = process.memoryUsage().heapUsed;
    add(20_000, 100_000);
    gc();
    const perTrace = (process.memoryUsage().heapUsed - before) / 100_000;
    // A string of 32 characters alone is ~48 bytes of heap, its map entry ~24 more; typed
    // arrays past 64 bytes keep their elements off it.
    expect(perTrace).toBeLessThan(8);
    expect(pending.messages('S').length).toBe(SHARDS);
  });

  it('reads only positive whole sequences of the trace asked, and nothing from a message it cannot parse', () => {
    const t = id(9);
    expect(seqsIn(Buffer.from(`{"${t}":[3,-1,0,2.5,"4",9007199254740993,5]}`), t)).toEqual([3, 5]);
    expect(seqsIn(Buffer.from(`{"${t}":[3`), t)).toEqual([]);
    expect(seqsIn(Buffer.from(`{"${t}":{"a":1}}`), t)).toEqual([]);
    expect(seqsIn(Buffer.from(`{"${id(8)}":[1]}`), t)).toEqual([]);
  });

  it('reads an index message alike for a lookup and for a merge', () => {
    const t = id(9);
    const messages = [
      `{"${t}":[3,-1,0,2.5,"4",9007199254740993,5]}`,
      `{"${t}":[3`,
      `{"${t}":{"a":1}}`,
      `[{"${t}":[6]}]`,
      `{"${id(8)}":[1],"${t}":[7,7]}`,
    ].map((text) => Buffer.from(text));
    const looked = messages.flatMap((m) => seqsIn(m, t));
    expect(looked).toEqual([3, 5, 7, 7]);
    expect([...(mergeEntries(messages, 1).get(t) ?? [])].sort()).toEqual([...new Set(looked)].sort());
  });

  it('merges index messages into entries, each sequence once, without those of batches gone from the trail or anything malformed', () => {
    const [a, b] = [id(1), id(2)];
    const messages = [
      ...encodeEntries(new Map([[a, [3, 7]]])),
      Buffer.from(`{"${a}":[7,9],"${b}":[2],"not-a-trace":[5],"${id(3)}":"x"}`),
      Buffer.from('{broken'),
    ];
    const merged = mergeEntries(messages, 3);
    expect([...merged.keys()]).toEqual([a]);
    expect([...(merged.get(a) ?? [])].sort()).toEqual([3, 7, 9]);
    const again = mergeEntries(encodeEntries(merged, 40), 1);
    expect([...(again.get(a) ?? [])].sort()).toEqual([3, 7, 9]);
  });

  it('finds the trace ids of a MessagePack batch in its bytes: every one decoding finds, whatever the other strings hold', () => {
    const tricky = ['«traceparent', '\u00abtraceparent\u00d97', `x«traceparent${newTraceparent()}`, 'ü'.repeat(40), ''];
    // W3C's length, not its digits: read from its bytes all the same, and refused.
    const upper = `00-${'A'.repeat(32)}-${'b'.repeat(16)}-01`;
    const event = (i: number): CallEvent => ({
      callId: `c${i}`,
      name: tricky[i % tricky.length] as string,
      target: 'app.x',
      op: '$run',
      session: tricky[(i + 2) % tricky.length] as string,
      principal: 'p',
      ...(i % 7 === 3
        ? {}
        : { traceparent: i % 11 === 5 ? 'not-a-traceparent' : i % 13 === 6 ? upper : newTraceparent() }),
      outcome: 'ok',
      durationMs: 1,
      attempts: 1,
      at: new Date(0).toISOString(),
    });
    for (let round = 0; round < 50; round++) {
      const events = Array.from({ length: 1 + (round % 20) }, (_, i) => event(round * 20 + i));
      const idsOf = (list: CallEvent[]) =>
        new Set(list.map((e) => traceIdOf(e.traceparent)).filter((id) => id !== undefined));
      const decoded = idsOf(events);
      const cases: Array<[Uint8Array, Set<string>]> = [
        [encodeCallEvents(events), decoded],
        [encode(events), decoded],
        [encode(events[0]), idsOf(events.slice(0, 1))],
      ];
      for (const [data, expected] of cases) {
        const found = traceIdsOfBatch(data);
        for (const id of expected) expect(found.has(id)).toBe(true);
        for (const id of found) expect(isTraceId(id)).toBe(true);
      }
      expect(traceIdsOfBatch(encodeCallEvents(events))).toEqual(decoded);
    }
  });
});
