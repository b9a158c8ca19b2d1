import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { RefusalSummary } from '../../src/audit/events.js';
import { RefusalBudget } from '../../src/audit/refusals.js';

describe('the budget of refusals without a valid grant', () => {
  let clock = 0;
  let summaries: RefusalSummary[];
  const budget = (perSecond: number, burst: number) =>
    new RefusalBudget(
      { perMinute: perSecond * 60, burst, summaryMs: 1000, now: () => clock, iso: () => `t${clock}` },
      (s) => summaries.push(s),
    );

  beforeEach(() => {
    clock = 0;
    summaries = [];
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('stores a burst, then as many a second as its rate, and counts the rest', () => {
    const b = budget(10, 100);
    const stored = (n: number) => Array.from({ length: n }, () => b.admit('missing', 'spy_run')).filter(Boolean).length;
    expect(stored(150)).toBe(100);
    clock += 1000;
    expect(stored(50)).toBe(10);
    clock += 250;
    expect(stored(10)).toBe(2);
    // A quiet spell refills the bucket to its burst, never past it.
    clock += 60_000;
    expect(stored(300)).toBe(100);
  });

  it('tells every counted refusal in a summary, by reason and tool, once per interval while it drops', () => {
    const b = budget(1, 2);
    const reasons = ['missing', 'missing', 'expired', 'bad_request', 'missing'];
    const stored = reasons.map((r, i) => b.admit(r, i === 4 ? 'other' : 'spy_run'));
    expect(stored).toEqual([true, true, false, false, false]);
    expect(summaries).toEqual([]);
    vi.advanceTimersByTime(1000);
    expect(summaries).toEqual([
      {
        count: 3,
        reasons: { expired: 1, bad_request: 1, missing: 1 },
        tools: ['spy_run', 'other'],
        otherTools: 0,
        since: 't0',
      },
    ]);
    // No refusal counted, no summary.
    vi.advanceTimersByTime(10_000);
    expect(summaries).toHaveLength(1);
    clock = 500;
    expect(b.admit('missing', 'x')).toBe(false);
    b.flush();
    expect(summaries[1]).toMatchObject({ count: 1, reasons: { missing: 1 }, since: 't500' });
  });

  it('lists 8 tool names at most, each cut to 32 characters, and counts the refusals of the others', () => {
    const b = budget(0, 0);
    for (let i = 0; i < 40; i++) b.admit('missing', `${i}-${'t'.repeat(100)}`);
    for (let i = 0; i < 5; i++) b.admit('missing', 'u'.repeat(300));
    b.flush();
    const [summary] = summaries;
    expect(summary?.count).toBe(45);
    expect(summary?.tools).toHaveLength(8);
    expect(summary?.tools.every((t) => t.length <= 32)).toBe(true);
    expect(summary?.otherTools).toBe(45 - 8);
  });

  it('with a rate of 0 stores none and summarises all', () => {
    const b = budget(0, 0);
    expect(Array.from({ length: 1000 }, () => b.admit('untrusted_issuer', 'x')).some(Boolean)).toBe(false);
    b.flush();
    expect(summaries).toEqual([
      { count: 1000, reasons: { untrusted_issuer: 1000 }, tools: ['x'], otherTools: 0, since: 't0' },
    ]);
  });
});
