/**
 * `system.tools`: the registry as a mount. `$list`, `$resolve` and `$introspect` over a
 * `ToolContextStore`; resolutions are cached per registry revision, so a warm `$resolve`
 * costs a map lookup.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import type { Logger } from '../bus/log.js';
import { Mount } from '../bus/mount.js';
import { Mounts } from '../bus/subjects.js';
import { SchemaId } from '../contracts/schemas.js';
import { listContexts } from './list.js';
import { resolveToolContext } from './resolver.js';
import { StaticStore, type ToolContextStore } from './store.js';
import type { ListReply, ListRequest, ResolvedToolContext, ResolveRequest } from './types.js';

/** Version of the registry implementation, as `$introspect` and `$SRV.INFO` report it. */
export const REGISTRY_VERSION = '0.1.0';

/** Resolves and lists over a store, caching resolutions per revision. */
export class Registry {
  private cache = new Map<string, ResolvedToolContext>();
  private cacheRevision = -1;
  private toolCount: { revision: number; count: number } | undefined;

  constructor(
    readonly store: ToolContextStore = new StaticStore(),
    private readonly cacheSize = 1024,
  ) {}

  /** `$resolve`, from the cache when this exact request was answered at this revision. */
  resolve(request: ResolveRequest): ResolvedToolContext {
    if (this.cacheRevision !== this.store.revision) {
      this.cache.clear();
      this.cacheRevision = this.store.revision;
    }
    const key = JSON.stringify(request);
    let resolved = this.cache.get(key);
    if (resolved === undefined) {
      resolved = resolveToolContext(request, this.store);
      if (this.cache.size >= this.cacheSize) this.cache.clear();
      this.cache.set(key, resolved);
    }
    return resolved;
  }

  /** `$list`. */
  list(request: ListRequest): ListReply {
    return listContexts(request, this.store);
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
        description: "Resolves an agent profile, its skills and required capabilities into one tool context.",
        request: SchemaId.ResolveRequest,
        response: SchemaId.ResolveReply,
        handle: (request: ResolveRequest) => registry.resolve(request),
      },
    },
  });
}
