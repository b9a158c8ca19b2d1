/**
 * One long-lived worker thread that answers requests one at a time, for work that would stall
 * the event loop that serves calls (registration checks, compiling large schemas). Started on
 * first use, restarted if it dies (what was in flight fails), and it keeps no process alive
 * while idle. A `bounded` request is refused past `maxQueued` requests held (running and queued).
 */
import { parentPort, Worker } from 'node:worker_threads';
import { UnavailableError } from './bus/errors.js';

/** What a worker receives: a request and its id. */
export interface ThreadRequest<T> {
  id: number;
  request: T;
}

/** What a worker answers: the id of its request, and its answer or why it failed. */
export interface ThreadAnswer<T> {
  id: number;
  answer?: T;
  failure?: string;
}

/** A request the worker never answered: it died or was closed first. Not the request's fault. */
export class ThreadStopped extends Error {
  override readonly name = 'ThreadStopped';
}

interface Pending<A> {
  resolve(answer: A): void;
  reject(error: Error): void;
}

/**
 * Under the TypeScript sources (tests), a worker runs its `.ts` file itself: Node strips its
 * types and a resolve hook maps the sources' `.js` specifiers to their `.ts` files.
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

/** A worker thread of requests `R` and answers `A`; `serve` (in the worker's module) is its other end. */
export class WorkerThread<R, A> {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending<A>>();
  private nextId = 0;

  /**
   * @param module the worker's module next to the caller: `new URL('./x-worker.js', import.meta.url)`
   *   (under the sources, its `.ts` file is run instead).
   * @param busy the message of a refusal past `maxQueued`, given how many are held.
   */
  constructor(
    private readonly module: URL,
    private readonly maxQueued: number,
    private readonly busy: (held: number) => string,
  ) {}

  /** Requests held now, running and queued. */
  get held(): number {
    return this.pending.size;
  }

  /**
   * The worker's answer; refused as unavailable past `maxQueued` when `bounded`; rejects with why
   * the request failed there, or `ThreadStopped` when the worker died (or was closed) first.
   */
  request(request: R, bounded = true): Promise<A> {
    if (bounded && this.pending.size >= this.maxQueued)
      return Promise.reject(new UnavailableError(this.busy(this.pending.size)));
    const id = this.nextId++;
    const worker = this.started();
    return new Promise<A>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.ref();
      worker.postMessage({ id, request } satisfies ThreadRequest<R>);
    });
  }

  /** Ends the worker; requests in flight fail. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private started(): Worker {
    if (this.worker !== undefined) return this.worker;
    const sources = import.meta.url.endsWith('.ts');
    const url = sources ? new URL(this.module.href.replace(/\.js$/, '.ts')) : this.module;
    const worker = new Worker(url, {
      execArgv: sources ? ['--experimental-transform-types', '--no-warnings', '--import', SOURCE_HOOK] : [],
    });
    worker.on('message', (answer: ThreadAnswer<A>) => this.settle(answer));
    worker.on('error', (err) => this.fail(worker, err));
    worker.on('exit', (code) => this.fail(worker, new Error(`the worker thread exited with code ${code}`)));
    // After the listeners (adding one refs the port again): an idle worker keeps no process alive.
    worker.unref();
    this.worker = worker;
    return worker;
  }

  private settle(answer: ThreadAnswer<A>): void {
    const pending = this.pending.get(answer.id);
    if (pending === undefined) return;
    this.pending.delete(answer.id);
    if (this.pending.size === 0) this.worker?.unref();
    if (answer.failure !== undefined) pending.reject(new Error(answer.failure));
    else pending.resolve(answer.answer as A);
  }

  private fail(worker: Worker, err: Error): void {
    if (this.worker !== worker && this.worker !== undefined) return;
    this.worker = undefined;
    const failed = [...this.pending.values()];
    this.pending.clear();
    for (const p of failed) p.reject(new ThreadStopped(err.message, { cause: err }));
  }
}

/**
 * The worker's end, run by its module: answers each request with `handle`, one at a time; what
 * `handle` throws is the request's failure.
 */
export function serveThread<R, A>(handle: (request: R) => A): void {
  const port = parentPort;
  if (port === null) throw new Error('this module runs as a worker thread');
  port.on('message', ({ id, request }: ThreadRequest<R>) => {
    let answer: A;
    try {
      answer = handle(request);
    } catch (err) {
      port.postMessage({ id, failure: (err as Error).message } satisfies ThreadAnswer<A>);
      return;
    }
    port.postMessage({ id, answer } satisfies ThreadAnswer<A>);
  });
}
