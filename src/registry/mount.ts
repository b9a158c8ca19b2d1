/**
 * `system.tools`: the registry as a mount. `$list`, `$resolve`, `$introspect`, and — over a
 * writable store (JetStream KV) — `$register` / `$unregister`, each change announced on
 * `system.tools.events.changed`. Resolutions are cached per registry revision, so a warm
 * `$resolve` costs a map lookup.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { encodedOnce, encodeBody } from '../bus/codec.js';
import { UnavailableError } from '../bus/errors.js';
import type { Logger } from '../bus/log.js';
import { Mount } from '../bus/mount.js';
import { eventSubject, Mounts } from '../bus/subjects.js';
import { SchemaId } from '../contracts/schemas.js';
import type { StoreChange } from './kv-store.js';
import { listContexts } from './list.js';
import type { Presence } from './presence.js';
import { resolveToolContext, type ResolveOptions } from './resolver.js';
import { StaticStore, type ToolContextStore } from './store.js';
import type {
  ChangedEvent,
  ListReply,
  ListRequest,
  RegisterReply,
  RegisterRequest,
  ResolvedToolContext,
  ResolveRequest,
  ToolContextSpec,
  UnregisterRequest,
} from './types.js';
import { assertRegistrable } from './validate.js';

/** Version of the registry implementation, as `$introspect` and `$SRV.INFO` report it. */
export const REGISTRY_VERSION = '0.2.0';

/** Subject of the registry's change events. */
export const CHANGED_EVENTS = eventSubject(Mounts.Tools, 'changed');

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

/** How to mount the registry. */
export interface RegistryMountOptions {
  registry?: Registry;
  maxRequestBytes?: number;
  logger?: Logger;
}

/** Builds the `system.tools` mount (call `start()` on it). */
export function registryMount(nc: NatsConnection, options: RegistryMountOptions = {}): Mount {
  const registry = options.registry ?? new Registry();
  const announce = (change: StoreChange): RegisterReply => {
    const event: ChangedEvent = { key: change.key, change: change.change, revision: change.revision };
    nc.publish(CHANGED_EVENTS, encodeBody(event));
    return { key: change.key, revision: change.revision };
  };
  return new Mount(nc, {
    name: Mounts.Tools,
    version: REGISTRY_VERSION,
    description: 'The tool registry: which tools an agent profile may use.',
    maxRequestBytes: options.maxRequestBytes,
    logger: options.logger,
    describe: () => registry.describe(),
    ops: {
      $list: {
        description: 'Lists tool contexts in key order, a page at a time.',
        request: SchemaId.ListRequest,
        response: SchemaId.ListReply,
        handle: (request: ListRequest) => registry.list(request),
      },
      $resolve: {
        description: 'Resolves an agent profile, its skills and required capabilities into one tool context.',
        request: SchemaId.ResolveRequest,
        response: SchemaId.ResolveReply,
        // A cached resolution is the same object each time: its bytes are encoded once.
        handle: (request: ResolveRequest) => {
          const resolved = registry.resolve(request);
          return resolved instanceof Promise ? resolved.then(encodedOnce) : encodedOnce(resolved);
        },
      },
      $register: {
        description: 'Registers (or, with expectedRevision, updates) a tool context in the shared registry.',
        request: SchemaId.RegisterRequest,
        response: SchemaId.RegisterReply,
        handle: async (request: RegisterRequest) => announce(await registry.register(request)),
      },
      $unregister: {
        description: 'Removes a registered tool context.',
        request: SchemaId.UnregisterRequest,
        response: SchemaId.RegisterReply,
        handle: async (request: UnregisterRequest) => announce(await registry.unregister(request)),
      },
    },
  });
}
