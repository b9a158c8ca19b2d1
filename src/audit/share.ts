/**
 * Each principal's share of the audit trail's bytes. The trail is bounded by bytes, oldest
 * dropped first, so without a share one agent calling fast pushes every other agent's events
 * out of it (3,000 calls a second of ~600 bytes fill 1 GiB in 10 minutes). A token bucket per
 * principal, in bytes of its encoded events, lets `bytesPerSecond` (`burstBytes` at once) into
 * the trail; past it the principal's events go to the overflow stream, still stored and
 * queryable, where only overflow pushes out overflow. Events without a principal share one bucket.
 *
 * The arithmetic (docs/operations.md, "The audit trail"): with the defaults a principal writes at most
 * `burst + rate × max_age` = 1/256 + 1/16 of the trail per `max_age`, so up to 15 principals
 * flooding at once (15 × 17/256 < 1) cannot push out an event younger than `max_age`.
 */
import { PerPrincipal, TokenBucket } from './token-buckets.js';

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

/** The buckets of every principal seen, and which events of a batch are past their share. */
export class TrailShare {
  private readonly now: () => number;
  private readonly buckets: PerPrincipal<TokenBucket>;

  constructor(options: TrailShareOptions) {
    const perMs = options.bytesPerSecond / 1000;
    const burst = options.burstBytes;
    this.now = options.now ?? (() => performance.now());
    this.buckets = new PerPrincipal(() => new TokenBucket(burst, perMs));
  }

  /**
   * Takes `bytes` from the bucket of `principal` (undefined: the one of events without one);
   * false, taking nothing, when it holds fewer: the event goes to the overflow stream.
   */
  admit(principal: string | undefined, bytes: number, now = this.now()): boolean {
    return this.buckets.of(principal ?? NO_PRINCIPAL).take(bytes, now);
  }
}
