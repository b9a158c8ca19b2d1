/**
 * The registry's state in JetStream KV: the built-ins, plus one key per registered context.
 * Every instance loads the bucket at start and follows it with a watch, so all instances
 * serve the same contexts; the registry revision is the bucket's newest sequence seen.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import {
  BadRequestError,
  ConflictError,
  ForbiddenError,
  type MatrixError,
  NotFoundError,
  TimeoutError,
} from '../bus/errors.js';
import { Bucket, type BucketEntry, type BucketWatch } from '../bus/kv.js';
import { type Logger, silentLogger } from '../bus/log.js';
import { builtinContexts } from './builtins.js';
import { OFF_LOOP_BYTES, registrationChecker } from './checker.js';
import { insertSorted, ProviderIndex, removeSorted } from './sorted-keys.js';
import {
  compareKeys,
  type LeftOutEntry,
  type StoreChange,
  type StoredContext,
  storedBuiltin,
  type ToolContextStore,
} from './store.js';
import type { ToolContextSpec } from './types.js';
import { type RegistrationCheck, registrationError } from './validate.js';

/** Longest reason kept for an entry left out, in characters. */
const MAX_ERROR_CHARS = 500;

/** NATS's default `max_payload`, when the server does not say. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/** Default bucket name (`MATRIX_TOOLS_BUCKET`). */
export const DEFAULT_BUCKET = 'matrix-tool-contexts';

/** How a KV store is opened. */
export interface KvStoreOptions {
  /** Bucket name; default `matrix-tool-contexts`. */
  bucket?: string;
  /** Replicas of the bucket when this creates it; default 1. */
  replicas?: number;
  /** Longest wait for the initial load, in ms; default 30000. */
  loadTimeoutMs?: number;
  logger?: Logger;
}

export type { LeftOutEntry, StoreChange } from './store.js';

/** Contexts from a KV bucket, merged with the built-ins. */
export class KvContextStore implements ToolContextStore {
  private readonly builtins = new Map(builtinContexts.map((spec) => [spec.key, storedBuiltin(spec)]));
  private readonly registered = new Map<string, StoredContext>();
  /** Every key served, sorted; kept up to date one change at a time. */
  private readonly sortedKeys: string[] = [...this.builtins.keys()].sort(compareKeys);
  private readonly providerIndex = new ProviderIndex();
  /** Entries of the bucket that fail the checks of `$register`, by key: left out, and reported. */
  private readonly leftOut = new Map<string, LeftOutEntry>();
  private applied = 0;
  /** While the bucket loads, keys and providers are indexed once at the end, not one insertion at a time. */
  private loading = true;
  private readonly waiters: Array<{ revision: number; resolve(): void }> = [];
  private readonly listeners: Array<(change: StoreChange) => void> = [];
  private watch: BucketWatch | undefined;
  /** The entries waiting on the checker thread, in bucket order; undefined when none. */
  private checking: Promise<void> | undefined;

  private constructor(
    readonly bucket: Bucket,
    private readonly logger: Logger,
    private readonly maxPayload: number,
  ) {
    for (const key of this.sortedKeys) this.providerIndex.add(key, this.builtins.get(key)?.spec.provides);
  }

  /** Opens (or creates) the bucket and resolves once every context in it is loaded. */
  static async open(nc: NatsConnection, options: KvStoreOptions = {}): Promise<KvContextStore> {
    const bucket = await Bucket.open(nc, options.bucket ?? DEFAULT_BUCKET, { replicas: options.replicas });
    const store = new KvContextStore(
      bucket,
      options.logger ?? silentLogger,
      nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD,
    );
    const last = await bucket.lastRevision();
    store.watch = bucket.watch(
      (entry) => store.apply(entry),
      (err) => store.logger.error('KV watch failed; resuming', { bucket: bucket.name, error: String(err) }),
    );
    await store.waitForRevision(last, options.loadTimeoutMs ?? 30_000);
    store.indexLoaded();
    return store;
  }

  get revision(): number {
    return this.applied;
  }

  get(key: string): StoredContext | undefined {
    return this.builtins.get(key) ?? this.registered.get(key);
  }

  keys(): readonly string[] {
    return this.sortedKeys;
  }

  providersOf(capability: string): readonly string[] {
    return this.providerIndex.of(capability);
  }

  /** The bucket's entries that are not served because `$register` would refuse them, in key order. */
  leftOutEntries(): readonly LeftOutEntry[] {
    return [...this.leftOut.values()].sort((a, b) => compareKeys(a.key, b.key));
  }

  /** Is `key` one of the built-ins (which cannot be registered over)? */
  isBuiltin(key: string): boolean {
    return this.builtins.has(key);
  }

  /**
   * Stores a spec (already validated). `expectedRevision`: 0 = only if new, n = only if the
   * context is at revision n. Resolves once this instance serves the change.
   */
  async register(spec: ToolContextSpec, expectedRevision?: number): Promise<StoreChange> {
    if (this.isBuiltin(spec.key))
      throw new ForbiddenError(`${spec.key} is a built-in context and cannot be registered over`);
    const value = new TextEncoder().encode(JSON.stringify(spec));
    const existed = this.registered.has(spec.key);
    const revision =
      expectedRevision === undefined
        ? await this.bucket.put(spec.key, value)
        : expectedRevision === 0
          ? await this.bucket.create(spec.key, value).catch((err: unknown) => {
              throw err instanceof ConflictError ? this.alreadyExists(spec.key, err) : err;
            })
          : await this.bucket.update(spec.key, value, expectedRevision);
    await this.waitForRevision(revision);
    return { key: spec.key, change: existed ? 'updated' : 'registered', revision };
  }

  /** What `expectedRevision: 0` (only if new) meets on a key that exists. */
  private alreadyExists(key: string, cause: ConflictError): ConflictError {
    const at = this.registered.get(key)?.revision;
    return new ConflictError(
      `${key} already exists${at === undefined ? '' : ` at revision ${at}`}: expectedRevision 0 registers only a new key`,
      { cause },
    );
  }

  /** Removes a registered context, only at `expectedRevision` when given. */
  async unregister(key: string, expectedRevision?: number): Promise<StoreChange> {
    if (this.isBuiltin(key)) throw new ForbiddenError(`${key} is a built-in context and cannot be unregistered`);
    const current = this.registered.get(key) ?? (await this.bucket.get(key));
    if (current === null || current === undefined) throw new NotFoundError(`no registered context ${key}`);
    if (expectedRevision !== undefined && expectedRevision !== current.revision) {
      throw new ConflictError(`${key} is at revision ${current.revision}, not ${expectedRevision}`);
    }
    const revision = await this.bucket.delete(key, expectedRevision);
    await this.waitForRevision(revision);
    return { key, change: 'unregistered', revision };
  }

  /**
   * Calls `listener` for every change this store applies (from any instance, or written to the
   * bucket directly); returns a function that stops it.
   */
  onChange(listener: (change: StoreChange) => void): () => void {
    this.listeners.push(listener);
    return () => {
      const i = this.listeners.indexOf(listener);
      if (i >= 0) this.listeners.splice(i, 1);
    };
  }

  /** Resolves once the store has applied `revision`; `TimeoutError` after `timeoutMs`. */
  waitForRevision(revision: number, timeoutMs = 10_000): Promise<void> {
    if (this.applied >= revision) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(
          new TimeoutError(
            `the registry did not reach revision ${revision} within ${timeoutMs} ms (at ${this.applied})`,
          ),
        );
      }, timeoutMs);
      const waiter = {
        revision,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      this.waiters.push(waiter);
    });
  }

  /** Stops following the bucket. */
  close(): void {
    this.watch?.stop();
  }

  /**
   * Applies entries in bucket order. A large PUT is checked on the checker thread (its schemas'
   * meta-schema checks and its fit cost ~40 ms per 32 KiB schema): entries after it wait their
   * turn, callers do not.
   */
  private apply(entry: BucketEntry): void {
    if (this.checking === undefined && !checkedOffLoop(entry)) {
      this.applyChecked(entry, entry.operation === 'PUT' ? this.checked(entry) : undefined);
      return;
    }
    const next = (this.checking ?? Promise.resolve()).then(async () => {
      this.applyChecked(entry, entry.operation === 'PUT' ? await this.checkedOffLoop(entry) : undefined);
    });
    this.checking = next;
    void next.then(() => {
      if (this.checking === next) this.checking = undefined;
    });
  }

  private applyChecked(entry: BucketEntry, spec: ToolContextSpec | undefined): void {
    const change = entry.operation === 'PUT' ? this.put(entry, spec) : this.remove(entry.key);
    if (entry.operation !== 'PUT') this.leftOut.delete(entry.key);
    this.applied = Math.max(this.applied, entry.revision);
    if (change !== undefined) for (const l of this.listeners) l({ key: entry.key, change, revision: entry.revision });
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      const w = this.waiters[i];
      if (w !== undefined && w.revision <= this.applied) {
        this.waiters.splice(i, 1);
        w.resolve();
      }
    }
  }

  /**
   * Serves a written entry when it passes the checks of `$register`; else leaves it (and any older
   * value of its key) out.
   */
  private put(entry: BucketEntry, spec: ToolContextSpec | undefined): StoreChange['change'] | undefined {
    if (spec === undefined) return this.remove(entry.key);
    this.leftOut.delete(entry.key);
    const previous = this.registered.get(entry.key);
    this.registered.set(entry.key, { spec, source: 'registered', revision: entry.revision });
    if (!this.loading) {
      if (previous === undefined) insertSorted(this.sortedKeys, entry.key);
      else this.providerIndex.remove(entry.key, previous.spec.provides);
      this.providerIndex.add(entry.key, spec.provides);
    }
    return previous === undefined ? 'registered' : 'updated';
  }

  private remove(key: string): StoreChange['change'] | undefined {
    const previous = this.registered.get(key);
    if (previous === undefined) return undefined;
    this.registered.delete(key);
    if (!this.loading) {
      removeSorted(this.sortedKeys, key);
      this.providerIndex.remove(key, previous.spec.provides);
    }
    return 'unregistered';
  }

  /**
   * Indexes what the initial load brought, in one sort (inserting 100,000 keys one by one would
   * move each array N times).
   */
  private indexLoaded(): void {
    for (const key of this.registered.keys()) this.sortedKeys.push(key);
    this.sortedKeys.sort(compareKeys);
    // In key order, each provider list only grows at its end.
    for (const key of this.sortedKeys) this.providerIndex.add(key, this.registered.get(key)?.spec.provides);
    this.loading = false;
  }

  /**
   * The entry's spec when `$register` would take it (PROTOCOL 7): stored state is input too.
   * Input schemas are checked against the meta-schema but not compiled here (the dispatcher
   * compiles each on first use, and refuses a call whose schema does not compile): compiling
   * every tool of every context would multiply start-up time.
   */
  private checked(entry: BucketEntry): ToolContextSpec | undefined {
    const { spec, error } = parsed(entry);
    return this.served(entry, spec, error ?? registrationError(spec, this.storedCheck(entry)));
  }

  /** `checked` on the checker thread; in-process if that thread fails (an entry is never dropped unchecked). */
  private async checkedOffLoop(entry: BucketEntry): Promise<ToolContextSpec | undefined> {
    const { spec, text, error } = parsed(entry);
    if (error !== undefined) return this.served(entry, spec, error);
    const problem = await registrationChecker
      .check(text, this.storedCheck(entry), false)
      .catch(() => registrationError(spec, this.storedCheck(entry)));
    return this.served(entry, spec, problem);
  }

  private storedCheck(entry: BucketEntry): RegistrationCheck {
    return { prefix: '', compile: false, maxPayload: this.maxPayload, storedBytes: entry.value.length };
  }

  /** The spec, when `problem` is undefined; else leaves the entry out, saying why. */
  private served(entry: BucketEntry, spec: unknown, problem: MatrixError | undefined): ToolContextSpec | undefined {
    if (problem === undefined) return spec as ToolContextSpec;
    let error = `${problem.code}: ${problem.message}`;
    // Violation paths carry the entry's own property names: an attacker's could be huge.
    if (error.length > MAX_ERROR_CHARS) error = `${error.slice(0, MAX_ERROR_CHARS - 3)}...`;
    this.logger.error('left out a KV entry that $register would refuse', {
      bucket: this.bucket.name,
      key: entry.key,
      revision: entry.revision,
      error,
    });
    this.leftOut.set(entry.key, { key: entry.key, revision: entry.revision, error });
    return undefined;
  }
}

function checkedOffLoop(entry: BucketEntry): boolean {
  return entry.operation === 'PUT' && entry.value.length >= OFF_LOOP_BYTES;
}

/** An entry's spec and text, or why it is no spec of its key. */
function parsed(entry: BucketEntry): { spec: unknown; text: string; error?: MatrixError } {
  const text = new TextDecoder().decode(entry.value);
  let spec: unknown;
  try {
    spec = JSON.parse(text);
  } catch (err) {
    return { spec, text, error: new BadRequestError(`not a JSON spec (${(err as Error).message})`) };
  }
  const key = (spec as ToolContextSpec | null)?.key;
  if (key === entry.key) return { spec, text };
  return { spec, text, error: new BadRequestError(`its spec's key is ${JSON.stringify(key)}, not the entry's key`) };
}
