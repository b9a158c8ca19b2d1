/**
 * Assertions inside NATS callbacks. nats.js calls a subscription's callback outside the test's
 * promise chain, so an `expect` that throws there fails nothing. `guarded` keeps what such a
 * callback throws, and the test running when it threw fails with it (checked after each test of
 * every file that imports this module).
 */
import { afterEach } from 'vitest';

const failures: unknown[] = [];

/** `fn`, with what it throws kept to fail the running test instead of vanishing in the NATS client. */
export function guarded<A extends unknown[], R>(fn: (...args: A) => R): (...args: A) => R | undefined {
  return (...args) => {
    try {
      return fn(...args);
    } catch (err) {
      failures.push(err);
      return undefined;
    }
  };
}

/** Keeps a failure found outside the test's own promise chain (e.g. a rejected handler). */
export function keepFailure(err: unknown): void {
  failures.push(err);
}

afterEach(() => {
  const [first, ...rest] = failures.splice(0);
  if (first === undefined) return;
  if (rest.length > 0 && first instanceof Error)
    first.message += ` (and ${rest.length} more failures in NATS callbacks)`;
  throw first;
});
