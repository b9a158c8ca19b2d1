import { decode, encode } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { type CallEvent, EventBatch, encodeCallEvents } from '../../src/audit/events.js';

// Required<>: a field added to CallEvent must be added here, and then the encoder must write it.
const full: Required<CallEvent> = {
  callId: 'call_1',
  name: 'echo',
  target: 'bench.echo',
  op: '$echo',
  session: 'session-ö',
  principal: 'agent:🦊',
  traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
  outcome: 'error',
  code: 'timeout',
  durationMs: 12.345,
  attempts: 3,
  argumentsDigest: '0123456789abcdef',
  argumentsBytes: 70_000,
  at: '2026-11-30T09:30:54.123Z',
  grantFailure: 'expired',
  grantSubject: 'agent:ö',
  approvalId: 'aaaaaaaaaaaaaaaaaaaa-bbbbbbbbbbbb',
  approvedBy: 'user:ana',
  rejectedBy: 'user:bob',
  approvalWaitMs: 61_234,
  refused: {
    count: 70_000,
    reasons: { missing: 69_000, bad_request: 999, expired: 1 },
    tools: ['spy_run', 'ü'.repeat(32)],
    otherTools: 3,
    since: '2026-11-30T09:30:53.000Z',
  },
  definition: { server: 'fx', tool: 'greet', change: 'accepted', before: 'a'.repeat(64), after: 'b'.repeat(64) },
};

describe('the call event encoder', () => {
  it('writes what the generic MessagePack encoder writes, field for field', () => {
    expect(decode(encodeCallEvents([full]))).toEqual([full]);
    expect(decode(encodeCallEvents([full]))).toEqual(decode(encode([full])));
  });

  it('writes the event of a call that ran as a fixmap, and one with more than 15 fields as a map16 of the same fields', () => {
    const {
      grantFailure: _f,
      grantSubject: _s,
      refused: _r,
      definition: _d,
      approvalId: _a,
      approvedBy: _b,
      rejectedBy: _j,
      approvalWaitMs: _w,
      ...ran
    } = full;
    const bytes = encodeCallEvents([ran]);
    expect(bytes[1]).toBe(0x80 | 14);
    const everything = encodeCallEvents([full]);
    expect(everything[1]).toBe(0xde);
    expect(decode(everything)).toEqual([full]);
  });

  it('leaves out undefined fields', () => {
    const sparse: CallEvent = { callId: 'c', name: 'n', outcome: 'ok', durationMs: 0, at: 'now', code: undefined };
    expect(decode(encodeCallEvents([sparse]))).toEqual([
      { callId: 'c', name: 'n', outcome: 'ok', durationMs: 0, at: 'now' },
    ]);
  });

  it('keeps numbers and strings of every size exact, each in its smallest form', () => {
    const numbers = [
      0,
      1,
      127,
      128,
      255,
      256,
      65_535,
      65_536,
      2 ** 32 - 1,
      2 ** 32,
      2 ** 53 - 1,
      -1,
      -200,
      1.5,
      1e-9,
      Number.MAX_VALUE,
    ];
    const strings = [
      '',
      'a',
      'x'.repeat(31),
      'x'.repeat(32),
      'y'.repeat(255),
      'y'.repeat(256),
      'z'.repeat(65_536),
      'x'.repeat(15),
      'x'.repeat(16),
      'é'.repeat(15),
      'é'.repeat(16),
      'é'.repeat(20),
      'é'.repeat(128),
      'é'.repeat(200),
      'ö'.repeat(40_000),
      `${'a'.repeat(30)}😀`,
      `${'a'.repeat(10)}😀`,
    ];
    const withStrings = strings.map((s): CallEvent => ({ ...full, callId: s, name: s }));
    const events = [
      ...numbers.map((n, i): CallEvent => ({ ...full, callId: String(i), durationMs: n, argumentsBytes: n })),
      ...withStrings,
    ];
    expect(decode(encodeCallEvents(events))).toEqual(events);
    // The generic encoder writes each string's header in its smallest form: as many bytes means
    // ours do too. (Numbers differ by design: a negative or a large integer is a float64 here.)
    expect(encodeCallEvents(withStrings).length).toBe(encode(withStrings).length);
  });

  it('writes batches of every array size, growing past its first buffer', () => {
    // Every field in the small arrays; the array-32 batch, megabytes past the first buffer, of
    // events with the required fields only (decoding 65,536 full events costs seconds).
    const least: CallEvent = { callId: '', name: full.name, outcome: full.outcome, durationMs: 1, at: full.at };
    for (const n of [0, 15, 16, 65_536]) {
      const each = n < 65_536 ? full : least;
      const events = Array.from({ length: n }, (_, i): CallEvent => ({ ...each, callId: `c${i}` }));
      const decoded = decode(encodeCallEvents(events)) as CallEvent[];
      expect(decoded.length).toBe(n);
      if (n > 0) expect(decoded[n - 1]).toEqual(events[n - 1]);
    }
  });
});

describe('a batch encoded as its events come', () => {
  const events = (n: number, from = 0) =>
    Array.from({ length: n }, (_, i): CallEvent => ({ ...full, callId: `c${from + i}` }));

  it('makes the bytes encodeCallEvents makes of the same events, a fixarray and an array 16 alike', () => {
    const batch = new EventBatch();
    // 1,024 full events pass the first 64 KiB: the batch grows its buffer and keeps it.
    for (const n of [1, 15, 16, 1024, 3]) {
      const some = events(n);
      for (const e of some) batch.add(e);
      expect(batch.count).toBe(n);
      const bytes = batch.take();
      expect(Buffer.from(bytes).equals(Buffer.from(encodeCallEvents(some)))).toBe(true);
      expect(batch.count).toBe(0);
    }
  });

  it('says what each event took, and takes back the last one', () => {
    const batch = new EventBatch();
    const [a, b] = events(2);
    const bytes = batch.add(a as CallEvent);
    expect(bytes).toBe(encodeCallEvents([a as CallEvent]).length - 1);
    batch.add(b as CallEvent);
    batch.dropLast();
    expect(batch.count).toBe(1);
    expect(decode(batch.take())).toEqual([a]);
  });

  it('leaves what encodeCallEvents makes alone, however the two interleave', () => {
    const batch = new EventBatch();
    const [a, b, c] = events(3);
    batch.add(a as CallEvent);
    const alone = encodeCallEvents([c as CallEvent]);
    batch.add(b as CallEvent);
    expect(decode(alone)).toEqual([c]);
    expect(decode(batch.take())).toEqual([a, b]);
  });
});
