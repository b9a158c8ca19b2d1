/**
 * `npm start`: connects to NATS (`NATS_URL`, default nats://127.0.0.1:4222), mounts
 * `system.tools`, logs one line when ready, and drains cleanly on SIGINT/SIGTERM.
 */
import { connectBus, connectOptionsFromEnv } from './bus/connect.js';
import { stderrLogger } from './bus/log.js';
import { registryMount } from './registry/mount.js';

async function main(): Promise<void> {
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
  const registry = await registryMount(nc, { logger: stderrLogger }).start();
  stderrLogger.info(`system.tools ready on ${nc.getServer()}`, { instance: registry.id });

  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    stderrLogger.info(`${signal}: draining`);
    await registry.stop();
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

void main();
