/**
 * `npm start`: connects to NATS (`NATS_URL`, default nats://127.0.0.1:4222), mounts
 * `system.tools` and `system.dispatcher` (`--no-registry` / `--no-dispatcher` turn one off),
 * logs one line when ready, and drains cleanly on SIGINT/SIGTERM.
 */
import { parseArgs } from 'node:util';
import type { NatsConnection } from '@nats-io/nats-core';
import { connectBus, connectOptionsFromEnv } from './bus/connect.js';
import { stderrLogger } from './bus/log.js';
import type { Mount } from './bus/mount.js';
import { Dispatcher } from './dispatcher/dispatcher.js';
import { dispatcherMount } from './dispatcher/mount.js';
import { localToolSource } from './dispatcher/sessions.js';
import { DEFAULT_BUCKET, KvContextStore } from './registry/kv-store.js';
import { Registry, registryMount } from './registry/mount.js';
import { Presence } from './registry/presence.js';
import { StaticStore, type ToolContextStore } from './registry/store.js';

async function main(): Promise<void> {
  const { values: flags } = parseArgs({
    options: {
      'no-registry': { type: 'boolean', default: false },
      'no-dispatcher': { type: 'boolean', default: false },
    },
  });
  const options = { ...connectOptionsFromEnv(), name: 'matrix-tool-registry' };
  let nc;
  try {
    nc = await connectBus(options);
  } catch (err) {
    process.stderr.write(
      `cannot reach NATS at ${options.servers} (${(err as Error).message}). ` +
        'Start one with `docker compose up -d nats`, or run a local `nats-server -js`, or set NATS_URL.\n',
    );
    process.exit(1);
  }

  const mounts: Mount[] = [];
  const registry = flags['no-registry'] ? new Registry() : new Registry(await openStore(nc), new Presence(nc));
  if (!flags['no-registry']) mounts.push(registryMount(nc, { registry, logger: stderrLogger }));
  let dispatcher: Dispatcher | undefined;
  if (!flags['no-dispatcher']) {
    // Beside the registry, resolve in this process: same state, one hop less.
    dispatcher = new Dispatcher(nc, flags['no-registry'] ? {} : { source: localToolSource(registry) });
    mounts.push(dispatcherMount(nc, { dispatcher, logger: stderrLogger }));
  }
  if (mounts.length === 0) {
    process.stderr.write('nothing to run: --no-registry and --no-dispatcher together leave no mount\n');
    process.exit(2);
  }
  await Promise.all(mounts.map((m) => m.start()));
  stderrLogger.info(`${mounts.map((m) => m.name).join(', ')} ready on ${nc.getServer()}`, {
    instances: Object.fromEntries(mounts.map((m) => [m.name, m.id])),
  });

  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    stderrLogger.info(`${signal}: draining`);
    await Promise.all(mounts.map((m) => m.stop()));
    dispatcher?.close();
    await nc.drain();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect' || s.type === 'reconnect') stderrLogger.info(`nats ${s.type}`, { server: s.server });
    }
  })();
}

/** The KV store when JetStream answers; else the built-ins alone, said in one line. */
async function openStore(nc: NatsConnection): Promise<ToolContextStore> {
  try {
    return await KvContextStore.open(nc, {
      bucket: process.env.MATRIX_TOOLS_BUCKET || DEFAULT_BUCKET,
      replicas: Number(process.env.MATRIX_TOOLS_REPLICAS) || 1,
      logger: stderrLogger,
    });
  } catch (err) {
    stderrLogger.error(`serving the built-in contexts only, registration off: ${(err as Error).message}`);
    return new StaticStore();
  }
}

void main();
