/** Waiting for what the bus delivers in its own time, without fixed sleeps. */

/** How long `eventually` keeps trying, and how often; both in ms. */
export interface EventuallyOptions {
  /** Give up after this long; default 10000 (a loaded CI machine, not the expected time). */
  timeoutMs?: number;
  /** Pause between tries; default 10. */
  intervalMs?: number;
}

/**
 * Retries `check` until it returns without throwing (or returns a value other than `false`),
 * then gives that value back. On time-out it throws the check's last error, so an `expect`
 * inside it fails the test with its own message.
 */
export async function eventually<T>(
  check: () => T | Promise<T>,
  options: EventuallyOptions = {},
): Promise<Exclude<T, false>> {
  const { timeoutMs = 10_000, intervalMs = 10 } = options;
  const end = Date.now() + timeoutMs;
  for (;;) {
    let failure: unknown;
    try {
      const value = await check();
      if (value !== false) return value as Exclude<T, false>;
      failure = new Error(`still false after ${timeoutMs} ms: ${check.toString().slice(0, 200)}`);
    } catch (err) {
      failure = err;
    }
    if (Date.now() >= end) throw failure;
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
