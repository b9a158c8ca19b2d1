/**
 * A principal's share of the audit trail: a token bucket in bytes of encoded events, one per
 * principal, refilled at 1/16 of the trail per max age and holding 1/256 of it at most.
 */
import { describe, expect, it } from 'vitest';
import { TrailShare, trailShareOf } from '../../src/audit/share.js';
import { MAX_PRINCIPALS } from '../../src/audit/token-buckets.js';

describe("a principal's share of the trail", () => {
  it('is 1/16 of the trail per max age in bursts of 1/256 by default: 64 MiB a week, 4 MiB at once, of 1 GiB', () => {
    const share = trailShareOf(2 ** 30, 7 * 86_400_000);
    expect(share.bytesPerSecond * 7 * 86_400).toBeCloseTo(2 ** 26, 0);
    expect(share.burstBytes).toBe(2 ** 22);
  });

  it('admits a burst, then its rate, and never takes from another principal', () => {
    let now = 0;
    const share = new TrailShare({ bytesPerSecond: 1000, burstBytes: 3000, now: () => now });
    expect([1, 2, 3, 4].map(() => share.admit('flooder', 1000))).toEqual([true, true, true, false]);
    // Refused events take nothing: after 1 s it has 1,000 bytes again, not less.
    now = 1000;
    expect(share.admit('flooder', 1000)).toBe(true);
    expect(share.admit('flooder', 1)).toBe(false);
    expect(share.admit('victim', 3000)).toBe(true);
    // A quiet spell refills to the burst, no further.
    now = 60_000;
    expect(share.admit('flooder', 3000)).toBe(true);
    expect(share.admit('flooder', 1)).toBe(false);
  });

  it('gives events without a principal one bucket between them', () => {
    const share = new TrailShare({ bytesPerSecond: 0, burstBytes: 1000, now: () => 0 });
    expect(share.admit(undefined, 1000)).toBe(true);
    expect(share.admit(undefined, 1)).toBe(false);
    expect(share.admit('someone', 1000)).toBe(true);
  });

  it(`holds the buckets of ${MAX_PRINCIPALS} principals at most, then starts them all afresh`, () => {
    const share = new TrailShare({ bytesPerSecond: 0, burstBytes: 1000, now: () => 0 });
    expect(share.admit('flooder', 1000)).toBe(true);
    for (let i = 1; i < MAX_PRINCIPALS; i++) share.admit(`agent-${i}`, 1);
    expect(share.admit('flooder', 1)).toBe(false);
    share.admit('one-too-many', 1);
    expect(share.admit('flooder', 1000)).toBe(true);
  });
});
