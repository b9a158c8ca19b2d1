/** Registry instances backed by a JetStream KV bucket, as `npm start` runs them. */
import type { NatsConnection } from '@nats-io/nats-core';
import type { Mount } from '../../src/bus/mount.js';
import { builtinContexts } from '../../src/registry/builtins.js';
import { KvContextStore } from '../../src/registry/kv-store.js';
import { Presence } from '../../src/registry/presence.js';
import { Registry } from '../../src/registry/registry.js';
import { StaticStore, storedBuiltin } from '../../src/registry/store.js';
import { type RegistryMountOptions, registryMount } from '../../src/registry/system-tools.js';
import type { ToolContextSpec } from '../../src/registry/types.js';

/** One registry instance. */
export interface Instance {
  store: KvContextStore;
  registry: Registry;
  mount: Mount;
  /** Stops the mount and the store's watch (the bucket stays). */
  stop(): Promise<void>;
}

/** Opens a KV store on `bucket` and mounts `system.tools` on it (started unless `mounted: false`). */
export async function startInstance(
  nc: NatsConnection,
  bucket: string,
  mounted = true,
  options: Omit<RegistryMountOptions, 'registry'> = {},
): Promise<Instance> {
  const store = await KvContextStore.open(nc, { bucket });
  const registry = new Registry(store, new Presence(nc, 500, 100));
  const mount = registryMount(nc, { ...options, registry });
  if (mounted) await mount.start();
  return {
    store,
    registry,
    mount,
    stop: async () => {
      await mount.stop();
      store.close();
    },
  };
}

let n = 0;

/** A bucket name of its own for each test. */
export function uniqueBucket(): string {
  return `test-tools-${process.pid}-${Date.now().toString(36)}-${n++}`;
}

/** A small valid context. */
export function contextSpec(key: string, extra: Partial<ToolContextSpec> = {}): ToolContextSpec {
  return {
    key,
    title: `Title of ${key}`,
    description: `The ${key} context`,
    matrixTools: [
      {
        name: `${key.replaceAll(/[^a-z0-9_]/g, '_')}_tool`,
        description: 'a tool',
        inputSchema: { type: 'object' },
        target: 'app.things',
        op: '$do',
      },
    ],
    permissions: { approval: 'never' },
    ...extra,
  };
}

/** `system.tools` serving the built-in contexts and `spec`, from memory (no bucket), started. */
export function staticRegistry(nc: NatsConnection, spec: ToolContextSpec): Promise<Mount> {
  const store = new StaticStore(
    [...builtinContexts.map(storedBuiltin), { spec, source: 'registered' as const, revision: 1 }],
    1,
  );
  return registryMount(nc, { registry: new Registry(store) }).start();
}
