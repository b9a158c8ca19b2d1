/**
 * The registry: resolves, lists and registers tool contexts over a store, caching
 * resolutions per registry revision so that a warm `$resolve` costs a map lookup.
 */

import { BoundedCache, type CacheBounds } from '../bus/bounded-cache.js';
import { Encoding, encodedOnce, sessionKey } from '../bus/codec.js';
import { UnavailableError } from '../bus/errors.js';
import { firstAndMore } from '../bus/schema-compiler.js';
import { cacheLookups } from '../telemetry/caches.js';
import { OFF_LOOP_BYTES, registrationChecker } from './checker.js';
import { listContexts } from './list.js';
import type { Presence } from './presence.js';
import { type ResolveOptions, resolveToolContext } from './resolver.js';
import { DEFAULT_SEARCH_TOOLS, ToolSearch } from './search/searcher.js';
import { type LeftOutEntry, StaticStore, type StoreChange, type ToolContextStore } from './store.js';
import type {
  Diagnostic,
  ListReply,
  ListRequest,
  RegisterRequest,
  ResolvedToolContext,
  ResolveRequest,
  SearchReply,
  SearchRequest,
  ToolContextSpec,
  UnregisterRequest,
} from './types.js';
import { registrationError } from './validate.js';

/** A store that can take registrations. */
export interface WritableToolContextStore extends ToolContextStore {
  register(spec: ToolContextSpec, expectedRevision?: number): Promise<StoreChange>;
  unregister(key: string, expectedRevision?: number): Promise<StoreChange>;
}

function isWritable(store: ToolContextStore): store is WritableToolContextStore {
  return typeof (store as Partial<WritableToolContextStore>).register === 'function';
}

/** Bounds of the resolution cache: 1,024 entries, 64 MiB. */
export const DEFAULT_RESOLUTION_CACHE: CacheBounds = { maxEntries: 1024, maxBytes: 64 * 1024 * 1024 };

/** Most diagnostics `$introspect` lists about stored contexts it leaves out. */
const MAX_LEFT_OUT_LISTED = 100;

/** What `$introspect` says of one stored context left out. */
function leftOutDiagnostic(e: LeftOutEntry): Diagnostic {
  return {
    level: 'error',
    code: 'stored_context_invalid',
    message: `stored context '${e.key}' (revision ${e.revision}) is not served: ${e.error}`,
    context: e.key,
  };
}

/** Resolves, lists and registers over a store, caching resolutions per revision. */
export class Registry {
  private readonly cache: BoundedCache<ResolvedToolContext>;
  private cacheRevision = -1;
  private readonly toolNames = new ContextCount(toolNamesOf);
  /** Made on first use (presence, `system.agents`), then kept up to date: start-up does not pay for it. */
  private targetCount: ContextCount | undefined;
  private readonly keys = new WeakMap<object, string>();
  /** The session indexes `$search` reads. */
  readonly searches: ToolSearch;

  constructor(
    readonly store: ToolContextStore = new StaticStore(),
    private readonly presence?: Presence,
    cache: Partial<CacheBounds> = {},
    searchTools = DEFAULT_SEARCH_TOOLS,
  ) {
    this.cache = new BoundedCache({ ...DEFAULT_RESOLUTION_CACHE, ...cache });
    this.searches = new ToolSearch(searchTools);
    for (const key of store.keys()) this.toolNames.set(key, store.get(key)?.spec);
    store.onChange?.((change) => {
      const spec = store.get(change.key)?.spec;
      this.toolNames.set(change.key, spec);
      this.targetCount?.set(change.key, spec);
    });
  }

  /**
   * `$resolve`, from the cache when this exact request was answered at this revision.
   * `PayloadTooLargeError` for a request whose JSON text passes `MAX_SESSION_REQUEST_CHARS`.
   */
  resolve(request: ResolveRequest): ResolvedToolContext | Promise<ResolvedToolContext> {
    const key = this.keyOf(request);
    if (request.onlyAvailable && this.presence !== undefined) {
      return this.presence
        .current(this.targets())
        .then((live) => this.cached(`${live.version}|${key}`, request, { isLive: live.isLive }));
    }
    return this.cached(key, request, {});
  }

  /**
   * `$search` (PROTOCOL 13): the session resolved as `$resolve` would (the caller admits it under
   * the same grant rules first), then searched within its tools only.
   */
  search(request: SearchRequest): SearchReply | Promise<SearchReply> {
    const { session, query, limit } = request;
    const key = this.keyOf(session);
    const resolved = this.resolve(session);
    return resolved instanceof Promise
      ? resolved.then((r) => this.searches.reply(key, session, r, query, limit))
      : this.searches.reply(key, session, resolved, query, limit);
  }

  /** `$list`; a page fits in `maxReplyBytes` (the server's max_payload). */
  list(request: ListRequest, maxReplyBytes?: number): ListReply {
    return listContexts(request, this.store, maxReplyBytes);
  }

  /**
   * `$register`: checks the spec as PROTOCOL 7 says (with `maxPayload`, the server's, that
   * its resolution fits), then stores it; resolves once this instance serves it.
   */
  async register(request: RegisterRequest, maxPayload?: number): Promise<StoreChange> {
    const store = this.writable();
    // The size as stored lets the size check skip rendering a context far too small to matter.
    // A large spec is checked on the checker's thread: calls go on while its schemas compile.
    const specText = JSON.stringify(request.spec);
    const storedBytes = Buffer.byteLength(specText);
    const check = maxPayload === undefined ? {} : { maxPayload, storedBytes };
    const error =
      storedBytes < OFF_LOOP_BYTES
        ? registrationError(request.spec, check)
        : await registrationChecker.check(specText, check);
    if (error !== undefined) throw error;
    return store.register(request.spec, request.expectedRevision);
  }

  /** `$unregister`. */
  unregister(request: UnregisterRequest): Promise<StoreChange> {
    return this.writable().unregister(request.key, request.expectedRevision);
  }

  /**
   * Calls `listener` for each change of the store (from any instance, or a direct write to it);
   * returns a function that stops it.
   */
  onChange(listener: (change: StoreChange) => void): () => void {
    return this.store.onChange?.(listener) ?? (() => {});
  }

  /** What `$introspect` adds for the registry: revision, counts, and the stored contexts left out. */
  describe(): { revision: number; contexts: number; tools: number; diagnostics?: Diagnostic[] } {
    const described: ReturnType<Registry['describe']> = {
      revision: this.store.revision,
      contexts: this.store.keys().length,
      tools: this.toolNames.size,
    };
    const leftOut = this.store.leftOutEntries?.() ?? [];
    if (leftOut.length > 0) {
      described.diagnostics = firstAndMore(
        leftOut,
        MAX_LEFT_OUT_LISTED,
        (first) => first.map(leftOutDiagnostic),
        (listed, left) => [
          ...listed,
          { level: 'error', code: 'stored_context_invalid', message: `and ${left} more stored contexts not served` },
        ],
      );
    }
    return described;
  }

  /**
   * The targets the registered tools name, in no order: the same array until one is first named
   * or last dropped, so presence keeps its snapshot across changes that add no target.
   */
  targets(): readonly string[] {
    if (this.targetCount === undefined) {
      this.targetCount = new ContextCount(targetsOf);
      for (const key of this.store.keys()) this.targetCount.set(key, this.store.get(key)?.spec);
    }
    return this.targetCount.values();
  }

  /** Estimated bytes the resolution cache holds. */
  get cachedBytes(): number {
    return this.cache.bytes;
  }

  /** The cache key of a request; a frozen one (the mount's, for bytes it has seen) keeps its key. */
  private keyOf(request: ResolveRequest): string {
    let key = this.keys.get(request);
    if (key !== undefined) return key;
    key = sessionKey(JSON.stringify(request));
    if (Object.isFrozen(request)) this.keys.set(request, key);
    return key;
  }

  private cached(key: string, request: ResolveRequest, options: ResolveOptions): ResolvedToolContext {
    if (this.cacheRevision !== this.store.revision) {
      this.cache.clear();
      this.cacheRevision = this.store.revision;
    }
    let resolved = this.cache.get(key);
    if (resolved !== undefined) cacheLookups.resolutions.hit++;
    else {
      cacheLookups.resolutions.miss++;
      resolved = resolveToolContext(request, this.store, options);
      // The reply's bytes are encoded once and kept with it (the mount sends them): the
      // object, its MessagePack and maybe its JSON, each about that size.
      this.cache.set(key, resolved, key.length + 3 * encodedOnce(resolved).bytes(Encoding.MsgPack).length);
    }
    return resolved;
  }

  private writable(): WritableToolContextStore {
    if (!isWritable(this.store)) {
      throw new UnavailableError(
        'this registry serves the built-in contexts only (it runs without JetStream): registration is unavailable',
      );
    }
    return this.store;
  }
}

/** How many distinct tool names the registry holds, kept as contexts change (never recounted over all N). */
/** How many contexts hold each value (a tool name, a target) of their spec, kept per change. */
class ContextCount {
  /** Contexts holding each value. */
  private readonly holders = new Map<string, number>();
  private readonly valuesByKey = new Map<string, readonly string[]>();
  private list: readonly string[] | undefined;

  constructor(private readonly valuesOf: (spec: ToolContextSpec) => readonly string[]) {}

  /** Records the values of context `key` (none when it is gone). */
  set(key: string, spec: ToolContextSpec | undefined): void {
    for (const value of this.valuesByKey.get(key) ?? []) {
      const left = (this.holders.get(value) ?? 1) - 1;
      if (left > 0) this.holders.set(value, left);
      else {
        this.holders.delete(value);
        this.list = undefined;
      }
    }
    const values = spec === undefined ? [] : [...new Set(this.valuesOf(spec))];
    if (values.length === 0) this.valuesByKey.delete(key);
    else this.valuesByKey.set(key, values);
    for (const value of values) {
      const held = this.holders.get(value) ?? 0;
      if (held === 0) this.list = undefined;
      this.holders.set(value, held + 1);
    }
  }

  get size(): number {
    return this.holders.size;
  }

  /** The distinct values, as one array until the set of them changes. */
  values(): readonly string[] {
    this.list ??= [...this.holders.keys()];
    return this.list;
  }
}

const toolNamesOf = (spec: ToolContextSpec) => (spec.matrixTools ?? []).map((t) => t.name);
const targetsOf = (spec: ToolContextSpec) => (spec.matrixTools ?? []).map((t) => t.target);
