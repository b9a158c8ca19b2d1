/**
 * Token buckets, one per principal: how the trail share (`share.ts`, in bytes of events) and the
 * refusal budgets (`refusals.ts`, in stored refusals) bound what one principal writes. A bucket
 * fills at its rate up to its burst and gives tokens while it holds them; an instance keeps at
 * most `MAX_PRINCIPALS` principals, past which they all start afresh, so a flood of new
 * principals costs a bounded map, not one entry each for ever.
 */

/** Principals whose buckets one instance holds; past it they all start afresh. */
export const MAX_PRINCIPALS = 10_000;

/**
 * A token bucket: at most `burst` tokens, filled at `perMs` a ms. It is full when made, and a
 * full bucket does not fill, so the time it was made at never counts: only the time of each take.
 */
export class TokenBucket {
  private tokens: number;
  /** When it was last taken from, in ms. */
  private at = 0;

  constructor(
    private readonly burst: number,
    private readonly perMs: number,
  ) {
    this.tokens = burst;
  }

  /**
   * Fills the bucket for the time since it was last taken from, then takes `count` tokens at `now`
   * (ms); false, taking none, when it holds fewer.
   */
  take(count: number, now: number): boolean {
    if (this.tokens < this.burst) this.tokens = Math.min(this.burst, this.tokens + (now - this.at) * this.perMs);
    this.at = now;
    if (this.tokens < count) return false;
    this.tokens -= count;
    return true;
  }
}

/** One value (a bucket, or what holds one) per principal, at most `MAX_PRINCIPALS` of them. */
export class PerPrincipal<T> {
  private readonly values = new Map<string, T>();

  /** `create` makes a principal's value when it is first seen; `drop` is told of each value forgotten. */
  constructor(
    private readonly create: (principal: string) => T,
    private readonly drop?: (value: T) => void,
  ) {}

  /** The value of `principal`: a new one when it has none, after forgetting every other when the map is full. */
  of(principal: string): T {
    let value = this.values.get(principal);
    if (value === undefined) {
      if (this.values.size >= MAX_PRINCIPALS) this.clear();
      value = this.create(principal);
      this.values.set(principal, value);
    }
    return value;
  }

  /** Forgets every principal's value, telling `drop` of each first. */
  clear(): void {
    if (this.drop !== undefined) for (const value of this.values.values()) this.drop(value);
    this.values.clear();
  }
}
