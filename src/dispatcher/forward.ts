/**
 * What the `forward` step obeys besides the deadline: a bound of calls in flight per target
 * (taken before the request, given back on every way out), and when a failed request may be
 * sent again (PROTOCOL 6.1: only when it reached nobody, or the tool is idempotent).
 */
import { ErrorCode, MatrixError, NoRespondersError } from '../bus/errors.js';
import type { Route } from './route.js';

/** Why a slot was not given: the target's bound, or the caller's share of it. */
export type SlotRefusal = 'target' | 'caller';

/**
 * Calls in flight, per target mount, within a bound; and per principal within a share of it,
 * so one agent cannot take every slot of a target another agent needs. Calls with no principal
 * (no grant: a library caller, a service without trust) share only the target's bound.
 */
export class TargetSlots {
  private readonly taken = new Map<string, number>();
  private readonly byCaller = new Map<string, number>();

  /**
   * @param max most calls in flight to one target.
   * @param perCaller most of them one principal may hold; default a quarter of `max` (at least 1).
   */
  constructor(
    private readonly max: number,
    private readonly perCaller = Math.max(1, Math.floor(max / 4)),
  ) {}

  /** Takes a slot for `target` (and `principal`'s share of it); what refused it, if anything. */
  take(target: string, principal?: string): SlotRefusal | undefined {
    const n = this.taken.get(target) ?? 0;
    if (n >= this.max) return 'target';
    if (principal !== undefined) {
      const key = callerKey(target, principal);
      const mine = this.byCaller.get(key) ?? 0;
      if (mine >= this.perCaller) return 'caller';
      this.byCaller.set(key, mine + 1);
    }
    this.taken.set(target, n + 1);
    return undefined;
  }

  /** Gives back a slot taken for `target` (by `principal`). */
  give(target: string, principal?: string): void {
    release(this.taken, target);
    if (principal !== undefined) release(this.byCaller, callerKey(target, principal));
  }

  /** Calls in flight to `target` now (by `principal`, when given). */
  count(target: string, principal?: string): number {
    return (principal === undefined ? this.taken.get(target) : this.byCaller.get(callerKey(target, principal))) ?? 0;
  }

  /** Calls in flight to every target with one or more (for the in-flight gauge). */
  all(): ReadonlyMap<string, number> {
    return this.taken;
  }
}

function callerKey(target: string, principal: string): string {
  // A mount name has no space; the principal follows the first one.
  return `${target} ${principal}`;
}

function release(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left <= 0) counts.delete(key);
  else counts.set(key, left);
}

/** How retries go. */
export interface RetryPolicy {
  /** Most requests per call. */
  maxAttempts: number;
  /** First backoff, in ms, doubling each time (with jitter). */
  backoffMs: number;
}

/**
 * How long to wait before attempt `attempt + 1`, or undefined to give up. A route sent once (an
 * approved call, `route.ts`'s `routeTo`) is never sent again. No responders means nobody
 * received the request: sent again. An answer (an error reply, a mount's own 503 included) is
 * final unless the route is idempotent, and then only `internal`/`unavailable` are retried.
 * Never after a timeout (the target may still be working), never past the deadline.
 */
export function retryDelay(
  route: Route,
  err: unknown,
  attempt: number,
  deadline: number,
  policy: RetryPolicy,
): number | undefined {
  if (attempt >= policy.maxAttempts || route.sentOnce) return undefined;
  const reachedNobody = err instanceof NoRespondersError;
  const transient =
    err instanceof MatrixError && (err.code === ErrorCode.Internal || err.code === ErrorCode.Unavailable);
  if (!reachedNobody && !(route.idempotent && transient)) return undefined;
  const wait = policy.backoffMs * 2 ** (attempt - 1) * (0.5 + Math.random() / 2);
  return Date.now() + wait < deadline ? wait : undefined;
}
