/**
 * The registry: resolves, lists and registers tool contexts over a store, caching
 * resolutions per registry revision so that a warm `$resolve` costs a map lookup.
 */
import { UnavailableError } from '../bus/errors.js';
import type { StoreChange } from './kv-store.js';
import { listContexts } from './list.js';
import type { Presence } from './presence.js';
import { type ResolveOptions, resolveToolContext } from './resolver.js';
import { StaticStore, type ToolContextStore } from './store.js';
import type { ListReply, ListRequest, RegisterRequest, ResolvedToolContext, ResolveRequest, ToolContextSpec, UnregisterRequest } from './types.js';
import { assertRegistrable } from './validate.js';

/** A store that can take registrations. */
export interface WritableToolContextStore extends ToolContextStore {
  register(spec: ToolContextSpec, expectedRevision?: number): Promise<StoreChange>;
  unregister(key: string, expectedRevision?: number): Promise<StoreChange>;
}

function isWritable(store: ToolContextStore): store is WritableToolContextStore {
  return typeof (store as Partial<WritableToolContextStore>).register === 'function';
}

/** Resolves, lists and registers over a store, caching resolutions per revision. */
export class Registry {
  private cache = new Map<string, ResolvedToolContext>();
  private cacheRevision = -1;
  private toolCount: { revision: number; count: number } | undefined;

  constructor(
    readonly store: ToolContextStore = new StaticStore(),
    private readonly presence?: Presence,
    private readonly cacheSize = 1024,
  ) {}

  /** `$resolve`, from the cache when this exact request was answered at this revision. */
  resolve(request: ResolveRequest): ResolvedToolContext | Promise<ResolvedToolContext> {
    if (request.onlyAvailable && this.presence !== undefined) {
      return this.presence.current().then((live) => this.cached(`${live.version}|${JSON.stringify(request)}`, request, { isLive: live.isLive }));
    }
    return this.cached(JSON.stringify(request), request, {});
  }

  /** `$list`. */
  list(request: ListRequest): ListReply {
    return listContexts(request, this.store);
  }

  /** `$register`: validates fully, then stores; resolves once this instance serves it. */
  async register(request: RegisterRequest): Promise<StoreChange> {
    const store = this.writable();
    assertRegistrable(request.spec);
    return store.register(request.spec, request.expectedRevision);
  }

  /** `$unregister`. */
  unregister(request: UnregisterRequest): Promise<StoreChange> {
    return this.writable().unregister(request.key, request.expectedRevision);
  }

  /** What `$introspect` adds for the registry: revision and counts. */
  describe(): { revision: number; contexts: number; tools: number } {
    const revision = this.store.revision;
    if (this.toolCount?.revision !== revision) {
      const names = new Set<string>();
      for (const key of this.store.keys()) {
        for (const t of this.store.get(key)?.spec.matrixTools ?? []) names.add(t.name);
      }
      this.toolCount = { revision, count: names.size };
    }
    return { revision, contexts: this.store.keys().length, tools: this.toolCount.count };
  }

  private cached(key: string, request: ResolveRequest, options: ResolveOptions): ResolvedToolContext {
    if (this.cacheRevision !== this.store.revision) {
      this.cache.clear();
      this.cacheRevision = this.store.revision;
    }
    let resolved = this.cache.get(key);
    if (resolved === undefined) {
      resolved = resolveToolContext(request, this.store, options);
      if (this.cache.size >= this.cacheSize) this.cache.clear();
      this.cache.set(key, resolved);
    }
    return resolved;
  }

  private writable(): WritableToolContextStore {
    if (!isWritable(this.store)) {
      throw new UnavailableError('this registry serves the built-in contexts only (it runs without JetStream): registration is unavailable');
    }
    return this.store;
  }
}
