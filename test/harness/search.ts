/**
 * A bus for search tests: `system.tools` on a bucket of its own and `system.dispatcher`, both
 * trusting one grant issuer, with the given contexts registered.
 */
import type { KeyPair } from '@nats-io/nkeys';
import { createAccount } from '@nats-io/nkeys';
import { BusClient } from '../../src/bus/client.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import { IdentityGate } from '../../src/identity/gate.js';
import type { ToolContextSpec } from '../../src/registry/types.js';
import { testConnection } from './bus.js';
import { type Instance, startInstance, uniqueBucket } from './registry.js';

/** The running bus. */
export interface SearchBus {
  /** The grant issuer both mounts trust. */
  issuer: KeyPair;
  instance: Instance;
  client: BusClient;
  stop(): Promise<void>;
}

/** Starts a {@link SearchBus} with `specs` registered, in order. */
export async function startSearchBus(specs: readonly ToolContextSpec[], timeoutMs = 5_000): Promise<SearchBus> {
  const nc = await testConnection();
  const issuer = createAccount();
  const identity = IdentityGate.forIssuers([issuer.getPublicKey()]);
  const instance = await startInstance(nc, uniqueBucket(), true, { identity });
  for (const spec of specs) await instance.registry.register({ spec });
  const dispatcher = new Dispatcher(nc, { identity });
  const dispatching = await dispatcherMount(nc, { dispatcher, identity }).start();
  const client = new BusClient(nc, { timeoutMs });
  return {
    issuer,
    instance,
    client,
    stop: async () => {
      client.close();
      await dispatching.stop();
      dispatcher.close();
      await instance.stop();
    },
  };
}

/** A context of tools `[name, description]` on `app.<key>`, each with an `id` argument. */
export function searchContext(key: string, tools: Array<[string, string]>): ToolContextSpec {
  return {
    key,
    title: `Title of ${key}`,
    description: `The ${key} context`,
    matrixTools: tools.map(([name, description]) => ({
      name,
      description,
      inputSchema: { type: 'object', properties: { id: { type: 'string', description: 'What it acts on.' } } },
      target: `app.${key}`,
      op: '$run',
    })),
    permissions: { approval: 'never' },
  };
}
