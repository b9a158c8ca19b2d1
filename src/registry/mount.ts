/**
 * `system.tools`: the registry as a mount. `$list`, `$resolve`, `$introspect`, and — over a
 * writable store (JetStream KV) — `$register` / `$unregister`, each change announced on
 * `system.tools.events.changed`.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { encodeBody, encodedOnce } from '../bus/codec.js';
import type { Logger } from '../bus/log.js';
import { Mount } from '../bus/mount.js';
import { Mounts } from '../bus/subjects.js';
import { SchemaId } from '../contracts/schemas.js';
import { traceResolve } from '../telemetry/calls.js';
import { CHANGED_EVENTS } from './events.js';
import type { StoreChange } from './kv-store.js';
import { Registry } from './registry.js';
import type { ChangedEvent, ListRequest, RegisterReply, RegisterRequest, ResolveRequest, UnregisterRequest } from './types.js';

/** Version of the registry implementation, as `$introspect` and `$SRV.INFO` report it. */
export const REGISTRY_VERSION = '0.2.0';

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
        handle: (request: ResolveRequest, ctx) =>
          traceResolve(ctx.traceparent, request.profile, () => {
            const resolved = registry.resolve(request);
            return resolved instanceof Promise ? resolved.then(encodedOnce) : encodedOnce(resolved);
          }),
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
