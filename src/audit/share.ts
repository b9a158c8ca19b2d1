/**
 * Each principal's share of the audit trail's bytes. The trail is bounded by bytes, oldest
 * dropped first, so without a share one agent calling fast pushes every other agent's events
 * out of it (3,000 calls a second of ~600 bytes fill 1 GiB in 10 minutes). A token bucket per
 * principal, in bytes of its encoded events, lets `bytesPerSecond` (`burstBytes` at once) into
 * the trail; past it the principal's events go to the overflow stream, still stored and
 * queryable, where only overflow pushes out overflow. Events without a principal share one bucket.
 *
 * The arithmetic (README, "The audit trail"): with the defaults a principal writes at most
 * `burst + rate × max_age` = 1/256 + 1/16 of the trail per `max_age`, so up to 15 principals
 * flooding at once (15 × 17/256 < 1) cannot push out an event younger than `max_age`.
 */

/** How much of the trail each principal may fill; every field has a default (`trailShareOf`). */
export interface TrailShareOptions {
  /** Bytes of encoded events a principal writes to the trail per second, on average. */
  bytesPerSecond: number;
  /** Most bytes a principal writes to the trail in a row after a quiet spell. */
  burstBytes: number;
  /** The clock, in ms; default `performance.now`. */
  now?: () => number;
}

/** Default share of the trail a principal fills per `max_age`: 1/16. */
export const DEFAULT_SHARE_DIVISOR = 16;
/** Default burst of a principal: 1/256 of the trail (4 MiB of the default 1 GiB, ~7,000 events). */
export const DEFAULT_BURST_DIVISOR = 256;
/** Principals whose buckets one instance holds; past it they all start afresh. */
const MAX_PRINCIPALS = 10_000;
/** The bucket of events without a principal. */
const NO_PRINCIPAL = '';

/** A trail of `maxBytes` kept `maxAgeMs`: the default share of one principal, 1/`divisor` of it per `max_age`. */
export function trailShareOf(
  maxBytes: number,
  maxAgeMs: number,
  divisor = DEFAULT_SHARE_DIVISOR,
  burstDivisor = DEFAULT_BURST_DIVISOR,
): TrailShareOptions {
  return { bytesPerSecond: maxBytes / divisor / (maxAgeMs / 1000), burstBytes: Math.floor(maxBytes / burstDivisor) };
}

/**
 * The tokens a token bucket holds at `now` (ms) that held `tokens` when last filled, at `at`:
 * filled at `perMs` a ms, to `burst` at most. The trail's share fills a principal's bytes by it,
 * the refusal budget (`refusals.ts`) its stored refusals.
 */
export function tokensAt(tokens: number, at: number, now: number, perMs: number, burst: number): number {
  return tokens < burst ? Math.min(burst, tokens + (now - at) * perMs) : tokens;
}

/** One principal's bucket: bytes it may still write, and when it was last filled (ms). */
interface Bucket {
  bytes: number;
  at: number;
}

/** The buckets of every principal seen, and which events of a batch are past their share. */
export class TrailShare {
  private readonly perMs: number;
  private readonly burst: number;
  private readonly now: () => number;
  private readonly buckets = new Map<string, Bucket>();

  constructor(options: TrailShareOptions) {
    this.perMs = options.bytesPerSecond / 1000;
    this.burst = options.burstBytes;
    this.now = options.now ?? (() => performance.now());
  }

  /**
   * Takes `bytes` from the bucket of `principal` (undefined: the one of events without one);
   * false, taking nothing, when it holds fewer: the event goes to the overflow stream.
   */
  admit(principal: string | undefined, bytes: number, now = this.now()): boolean {
    const key = principal ?? NO_PRINCIPAL;
    let bucket = this.buckets.get(key);
    if (bucket === undefined) {
      if (this.buckets.size >= MAX_PRINCIPALS) this.buckets.clear();
      bucket = { bytes: this.burst, at: now };
      this.buckets.set(key, bucket);
    } else bucket.bytes = tokensAt(bucket.bytes, bucket.at, now, this.perMs, this.burst);
    bucket.at = now;
    if (bucket.bytes < bytes) return false;
    bucket.bytes -= bytes;
    return true;
  }
}
