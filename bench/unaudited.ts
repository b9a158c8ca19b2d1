/**
 * The bench's service with the audit trail off, in its own process: `system.tools` and
 * `system.dispatcher` as `serve` mounts them (the registry in process, callers trusted), but a
 * dispatcher that publishes no audit events and no audit stream or indexer. The protocol
 * requires the trail; this process exists only to measure what the trail costs beside it.
 */
import { connectBus, connectOptionsFromEnv } from '../src/bus/connect.js';
import { Dispatcher } from '../src/dispatcher/dispatcher.js';
import { localToolSource } from '../src/dispatcher/session-cache.js';
import { dispatcherMount } from '../src/dispatcher/system-dispatcher.js';
import { KvContextStore } from '../src/registry/kv-store.js';
import { Presence } from '../src/registry/presence.js';
import { Registry } from '../src/registry/registry.js';
import { registryMount } from '../src/registry/system-tools.js';

const nc = await connectBus({ ...connectOptionsFromEnv(), name: 'bench-unaudited' });
const registry = new Registry(
  await KvContextStore.open(nc, { bucket: process.env.MATRIX_TOOLS_BUCKET ?? 'bench-tools' }),
  new Presence(nc),
);
const dispatcher = new Dispatcher(nc, { source: localToolSource(registry), audit: false });
const mounts = [registryMount(nc, { registry }), dispatcherMount(nc, { dispatcher })];
await Promise.all(mounts.map((m) => m.start()));
process.stderr.write('system.tools, system.dispatcher ready (audit off)\n');
process.on('SIGTERM', () => void Promise.all(mounts.map((m) => m.stop())).then(() => process.exit(0)));
