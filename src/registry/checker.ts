/**
 * Registration checks off the event loop. Checking a worst-case spec (30 tools with 31 KB input
 * schemas, ~930 KB) costs ~5 s of CPU: each schema's meta-schema check and compile ~200 ms,
 * the fit check's five renderings ~300 ms (one strict rendering alone ~75 ms). On the thread
 * that serves `$call`, every slice of that stalls every caller; on one long-lived worker
 * thread it stalls none. Only `$register` uses it: the call path never waits on the worker.
 */
import { Worker } from 'node:worker_threads';
import {
  type ErrorCode,
  type ErrorDetails,
  errorFromWire,
  InternalError,
  type MatrixError,
  UnavailableError,
} from '../bus/errors.js';
import type { RegistrationCheck } from './validate.js';

/** Checks one worker holds at once (running and queued); past it `$register` is refused as unavailable. */
export const MAX_QUEUED_CHECKS = 32;

/** Specs of at least this many bytes of JSON are checked on the worker; a smaller one's checks cost a few ms in-process. */
export const OFF_LOOP_BYTES = 16 * 1024;

/** One check sent to the worker: the spec as JSON text (a string crosses threads without a deep clone). */
export interface CheckRequest {
  id: number;
  specText: string;
  check: RegistrationCheck;
}

/** The worker's answer: no error (valid), the error `registrationError` found, or a failure of the check itself. */
export interface CheckResult {
  id: number;
  error?: { code: ErrorCode; message: string; details: ErrorDetails | undefined };
  failure?: string;
}

interface Pending {
  resolve(error: MatrixError | undefined): void;
  reject(error: Error): void;
}

/**
 * Under the TypeScript sources (tests), the worker runs `check-worker.ts` itself: Node strips
 * its types and a resolve hook maps the sources' `.js` specifiers to their `.ts` files.
 */
const SOURCE_HOOK = `data:text/javascript,${encodeURIComponent(
  `import { registerHooks } from 'node:module';
registerHooks({ resolve(specifier, context, next) {
  try { return next(specifier, context); } catch (err) {
    if (specifier.endsWith('.js')) return next(specifier.slice(0, -3) + '.ts', context);
    throw err;
  }
} });`,
)}`;

/** One worker thread that checks registrations, started on first use and restarted if it dies. */
export class RegistrationChecker {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;

  constructor(private readonly maxQueued = MAX_QUEUED_CHECKS) {}

  /**
   * What `registrationError(spec, check)` would answer, computed on the worker. A `bounded`
   * check (`$register`'s) is refused past `maxQueued`; a store's checks of entries it read are
   * not (it sends one at a time, and an entry must be served or left out, never dropped).
   */
  check(specText: string, check: RegistrationCheck, bounded = true): Promise<MatrixError | undefined> {
    if (bounded && this.pending.size >= this.maxQueued)
      return Promise.reject(
        new UnavailableError(`the registry is checking ${this.pending.size} registrations already; retry shortly`),
      );
    const id = this.nextId++;
    const worker = this.started();
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.ref();
      const request: CheckRequest = { id, specText, check };
      worker.postMessage(request);
    });
  }

  /** Ends the worker; checks in flight fail. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private started(): Worker {
    if (this.worker !== undefined) return this.worker;
    const url = new URL(import.meta.url.endsWith('.ts') ? './check-worker.ts' : './check-worker.js', import.meta.url);
    const worker = new Worker(url, {
      execArgv: import.meta.url.endsWith('.ts')
        ? ['--experimental-transform-types', '--no-warnings', '--import', SOURCE_HOOK]
        : [],
    });
    worker.on('message', (result: CheckResult) => this.settle(result));
    worker.on('error', (err) => this.fail(worker, err));
    worker.on('exit', (code) => this.fail(worker, new Error(`the registration checker exited with code ${code}`)));
    // After the listeners (adding one refs the port again): an idle checker keeps no process alive.
    worker.unref();
    this.worker = worker;
    return worker;
  }

  private settle(result: CheckResult): void {
    const pending = this.pending.get(result.id);
    if (pending === undefined) return;
    this.pending.delete(result.id);
    if (this.pending.size === 0) this.worker?.unref();
    if (result.failure !== undefined) pending.reject(new InternalError(`registration check failed: ${result.failure}`));
    else if (result.error !== undefined)
      pending.resolve(errorFromWire(result.error.code, result.error.message, result.error.details));
    else pending.resolve(undefined);
  }

  private fail(worker: Worker, err: Error): void {
    if (this.worker !== worker && this.worker !== undefined) return;
    this.worker = undefined;
    const failed = [...this.pending.values()];
    this.pending.clear();
    for (const p of failed) p.reject(new InternalError('registration check failed', { cause: err }));
  }
}

/** The one checker thread of the process, shared by every registry and store in it. */
export const registrationChecker = new RegistrationChecker();
