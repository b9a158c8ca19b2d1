// A/B of the plain system.dispatcher.$call warm path, issue 24 (tasks): one process holds the caller,
// the registry, the dispatcher (with a task runner when told) and an echo target; it prints the wall
// time and the process CPU per call. Build each checkout (npm run build), start a nats-server with
// -js, then alternate: node bench/tasks-ab.mjs <checkout dir> <nats url> <calls> [tasks]
import { pathToFileURL } from 'node:url';

const [dir, url, n, withTasks] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(`${dir}/dist/src/${p}`).href);
const { connectBus } = await load('bus/connect.js');
const { BusClient } = await load('bus/client.js');
const { Mount } = await load('bus/mount.js');
const { dispatcherMount } = await load('dispatcher/system-dispatcher.js');
const { Dispatcher } = await load('dispatcher/dispatcher.js');
const { Registry } = await load('registry/registry.js');
const { StaticStore, storedBuiltin } = await load('registry/store.js');
const { registryMount } = await load('registry/system-tools.js');
const { builtinContexts } = await load('registry/builtins.js');
const nc = await connectBus({ servers: url });
const tag = `ab${process.pid}`;
const spec = {
  key: `ab-${tag}`,
  title: 'ab',
  description: 'ab',
  matrixTools: [
    { name: 'echo', description: 'echo', inputSchema: { type: 'object' }, target: `app.${tag}`, op: '$echo' },
  ],
  permissions: { approval: 'never' },
};
const store = new StaticStore([...builtinContexts.map(storedBuiltin), { spec, source: 'registered', revision: 1 }], 1);
const registry = await registryMount(nc, { registry: new Registry(store) }).start();
const target = await new Mount(nc, {
  name: `app.${tag}`,
  version: '0.0.1',
  description: 'echo',
  ops: { $echo: { description: 'echo', request: { type: 'object' }, response: { type: 'object' }, handle: (r) => r } },
}).start();
const dispatcher = new Dispatcher(nc, { audit: false });
let tasksOpts = {};
let runner;
if (withTasks === 'tasks') {
  const { TaskRunner } = await load('tasks/runner.js');
  const { TaskStore } = await load('tasks/store.js');
  runner = new TaskRunner(dispatcher, await TaskStore.open(nc, { bucket: `ab-tasks-${tag}` })).start();
  tasksOpts = { tasks: runner };
}
const mount = await dispatcherMount(nc, { dispatcher, ...tasksOpts }).start();
const client = new BusClient(nc, { timeoutMs: 10_000 });
const session = { profile: 'default', toolContextRefs: [spec.key] };
const call = (i) =>
  client.request('system.dispatcher', '$call', { session, call: { id: `c${i}`, name: 'echo', arguments: { i } } });
for (let i = 0; i < 2000; i++) await call(i); // warm
const total = Number(n);
const conc = 16;
let next = 0;
const t0 = performance.now();
const cpu0 = process.cpuUsage();
await Promise.all(
  Array.from({ length: conc }, async () => {
    while (next < total) await call(next++);
  }),
);
const ms = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
console.log(
  JSON.stringify({
    dir: dir.split('/').pop(),
    tasks: withTasks === 'tasks',
    calls: total,
    usPerCall: +((ms * 1000) / total).toFixed(2),
    cpuUsPerCall: +((cpu.user + cpu.system) / total).toFixed(2),
  }),
);
runner?.close();
await mount.stop();
dispatcher.close();
await target.stop();
await registry.stop();
client.close();
await nc.close();
