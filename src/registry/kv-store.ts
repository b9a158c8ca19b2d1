/**
 * The registry's state in JetStream KV: the built-ins, plus one key per registered context.
 * Every instance loads the bucket at start and follows it with a watch, so all instances
 * serve the same contexts; the registry revision is the bucket's newest sequence seen.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { ConflictError, ForbiddenError, NotFoundError, TimeoutError } from '../bus/errors.js';
import { Bucket, type BucketEntry, type BucketWatch } from '../bus/kv.js';
import { type Logger, silentLogger } from '../bus/log.js';
import { builtinContexts } from './builtins.js';
import { compareKeys, type StoredContext, storedBuiltin, type ToolContextStore } from './store.js';
import type { ToolContextSpec } from './types.js';

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

/** A change the store applied. */
export interface StoreChange {
  key: string;
  change: 'registered' | 'updated' | 'unregistered';
  revision: number;
}

/** Contexts from a KV bucket, merged with the built-ins. */
export class KvContextStore implements ToolContextStore {
  private readonly builtins = new Map(builtinContexts.map((spec) => [spec.key, storedBuiltin(spec)]));
  private readonly registered = new Map<string, StoredContext>();
  private sortedKeys: string[] | undefined;
  private providerIndex: Map<string, string[]> | undefined;
  private applied = 0;
  private readonly waiters: Array<{ revision: number; resolve(): void }> = [];
  private readonly listeners: Array<(change: StoreChange) => void> = [];
  private watch: BucketWatch | undefined;

  private constructor(
    readonly bucket: Bucket,
    private readonly logger: Logger,
  ) {}

  /** Opens (or creates) the bucket and resolves once every context in it is loaded. */
  static async open(nc: NatsConnection, options: KvStoreOptions = {}): Promise<KvContextStore> {
    const bucket = await Bucket.open(nc, options.bucket ?? DEFAULT_BUCKET, { replicas: options.replicas });
    const store = new KvContextStore(bucket, options.logger ?? silentLogger);
    const last = await bucket.lastRevision();
    store.watch = bucket.watch(
      (entry) => store.apply(entry),
      (err) => store.logger.error('KV watch failed; resuming', { bucket: bucket.name, error: String(err) }),
    );
    await store.waitForRevision(last, options.loadTimeoutMs ?? 30_000);
    return store;
  }

  get revision(): number {
    return this.applied;
  }

  get(key: string): StoredContext | undefined {
    return this.builtins.get(key) ?? this.registered.get(key);
  }

  keys(): readonly string[] {
    return (this.sortedKeys ??= [...this.builtins.keys(), ...this.registered.keys()].sort(compareKeys));
  }

  providersOf(capability: string): readonly string[] {
    if (this.providerIndex === undefined) {
      const index = new Map<string, string[]>();
      for (const key of this.keys()) {
        for (const c of this.get(key)?.spec.provides ?? []) {
          const list = index.get(c);
          if (list === undefined) index.set(c, [key]);
          else list.push(key);
        }
      }
      this.providerIndex = index;
    }
    return this.providerIndex.get(capability) ?? [];
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
    if (this.isBuiltin(spec.key)) throw new ForbiddenError(`${spec.key} is a built-in context and cannot be registered over`);
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
    return new ConflictError(`${key} already exists${at === undefined ? '' : ` at revision ${at}`}: expectedRevision 0 registers only a new key`, { cause });
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

  /** Calls `listener` for every change this store applies (from any instance). */
  onChange(listener: (change: StoreChange) => void): void {
    this.listeners.push(listener);
  }

  /** Resolves once the store has applied `revision`; `TimeoutError` after `timeoutMs`. */
  waitForRevision(revision: number, timeoutMs = 10_000): Promise<void> {
    if (this.applied >= revision) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(new TimeoutError(`the registry did not reach revision ${revision} within ${timeoutMs} ms (at ${this.applied})`));
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

  private apply(entry: BucketEntry): void {
    const had = this.registered.has(entry.key);
    let change: StoreChange['change'] | undefined;
    if (entry.operation === 'PUT') {
      const spec = this.decode(entry);
      if (spec !== undefined) {
        this.registered.set(entry.key, { spec, source: 'registered', revision: entry.revision });
        change = had ? 'updated' : 'registered';
      }
    } else if (had) {
      this.registered.delete(entry.key);
      change = 'unregistered';
    }
    if (change !== undefined) {
      this.sortedKeys = undefined;
      this.providerIndex = undefined;
    }
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

  private decode(entry: BucketEntry): ToolContextSpec | undefined {
    if (this.builtins.has(entry.key)) {
      this.logger.error('ignoring a KV entry that shadows a built-in context', { key: entry.key });
      return undefined;
    }
    try {
      const spec = JSON.parse(new TextDecoder().decode(entry.value)) as ToolContextSpec;
      if (spec?.key !== entry.key) throw new Error(`its key is ${String(spec?.key)}`);
      return spec;
    } catch (err) {
      this.logger.error('ignoring an unreadable KV entry', { key: entry.key, error: String(err) });
      return undefined;
    }
  }
}
