/**
 * Registration checks off the event loop. Checking a worst-case spec (30 tools with 31 KB input
 * schemas, ~930 KB) costs ~5 s of CPU: each schema's meta-schema check and compile ~200 ms,
 * the fit check's five renderings ~300 ms (one strict rendering alone ~75 ms). On the thread
 * that serves `$call`, every slice of that stalls every caller; on one long-lived worker
 * thread it stalls none. Only `$register` uses it: the call path never waits on the worker.
 */
import {
  type ErrorCode,
  type ErrorDetails,
  errorFromWire,
  InternalError,
  type MatrixError,
  UnavailableError,
} from '../bus/errors.js';
import { WorkerThread } from '../worker-thread.js';
import type { RegistrationCheck } from './validate.js';

/** Checks one worker holds at once (running and queued); past it `$register` is refused as unavailable. */
export const MAX_QUEUED_CHECKS = 32;

/**
 * Specs of at least this many bytes of JSON are checked on the worker; a smaller one's checks cost
 * a few ms in-process.
 */
export const OFF_LOOP_BYTES = 16 * 1024;

/** One check sent to the worker: the spec as JSON text (a string crosses threads without a deep clone). */
export interface CheckRequest {
  specText: string;
  check: RegistrationCheck;
}

/** The worker's answer: no error (valid), or the error `registrationError` found. */
export interface CheckResult {
  error?: { code: ErrorCode; message: string; details: ErrorDetails | undefined };
}

/** One worker thread that checks registrations, started on first use and restarted if it dies. */
export class RegistrationChecker {
  private readonly thread: WorkerThread<CheckRequest, CheckResult>;

  constructor(maxQueued = MAX_QUEUED_CHECKS) {
    this.thread = new WorkerThread(
      new URL('./check-worker.js', import.meta.url),
      maxQueued,
      (held) => `the registry is checking ${held} registrations already; retry shortly`,
    );
  }

  /**
   * What `registrationError(spec, check)` would answer, computed on the worker. A `bounded`
   * check (`$register`'s) is refused past `maxQueued`; a store's checks of entries it read are
   * not (it sends one at a time, and an entry must be served or left out, never dropped).
   */
  async check(specText: string, check: RegistrationCheck, bounded = true): Promise<MatrixError | undefined> {
    let result: CheckResult;
    try {
      result = await this.thread.request({ specText, check }, bounded);
    } catch (err) {
      if (err instanceof UnavailableError) throw err;
      throw new InternalError(`registration check failed: ${(err as Error).message}`, { cause: err });
    }
    return result.error === undefined
      ? undefined
      : errorFromWire(result.error.code, result.error.message, result.error.details);
  }

  /** Ends the worker; checks in flight fail. */
  close(): Promise<void> {
    return this.thread.close();
  }
}

/** The one checker thread of the process, shared by every registry and store in it. */
export const registrationChecker = new RegistrationChecker();
