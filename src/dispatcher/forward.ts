/**
 * What the `forward` step obeys besides the deadline: a bound of calls in flight per target
 * (taken before the request, given back on every way out), and when a failed request may be
 * sent again (PROTOCOL 6.1: only when it reached nobody, or the tool is idempotent).
 */
import { ErrorCode, MatrixError, NoRespondersError } from '../bus/errors.js';
import type { Route } from './route.js';

/** Calls in flight, per target mount, within a bound. */
export class TargetSlots {
  private readonly taken = new Map<string, number>();

  /** @param max most calls in flight to one target. */
  constructor(private readonly max: number) {}

  /** Takes a slot for `target`; false when all are taken. */
  take(target: string): boolean {
    const n = this.taken.get(target) ?? 0;
    if (n >= this.max) return false;
    this.taken.set(target, n + 1);
    return true;
  }

  /** Gives back a slot taken for `target`. */
  give(target: string): void {
    const left = (this.taken.get(target) ?? 1) - 1;
    if (left <= 0) this.taken.delete(target);
    else this.taken.set(target, left);
  }

  /** Calls in flight to `target` now. */
  count(target: string): number {
    return this.taken.get(target) ?? 0;
  }

  /** Calls in flight to every target with one or more (for the in-flight gauge). */
  all(): ReadonlyMap<string, number> {
    return this.taken;
  }
}

/** How retries go. */
export interface RetryPolicy {
  /** Most requests per call. */
  maxAttempts: number;
  /** First backoff, in ms, doubling each time (with jitter). */
  backoffMs: number;
}

/**
 * How long to wait before attempt `attempt + 1`, or undefined to give up. No responders means
 * nobody received the request: always sent again. An answer — an error reply, a mount's own
 * 503 included — is final unless the route is idempotent (never an approved call), and then
 * only `internal`/`unavailable` are retried. Never a timeout (the target may still be working),
 * never past the deadline.
 */
export function retryDelay(route: Route, err: unknown, attempt: number, deadline: number, policy: RetryPolicy): number | undefined {
  if (attempt >= policy.maxAttempts) return undefined;
  const reachedNobody = err instanceof NoRespondersError;
  const transient = err instanceof MatrixError && (err.code === ErrorCode.Internal || err.code === ErrorCode.Unavailable);
  if (!reachedNobody && !(route.idempotent && transient)) return undefined;
  const wait = policy.backoffMs * 2 ** (attempt - 1) * (0.5 + Math.random() / 2);
  return Date.now() + wait < deadline ? wait : undefined;
}
