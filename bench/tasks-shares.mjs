// What one principal keeps when its tasks are made on several instances at once (issue 41: the
// record and byte shares, 256 records and 8 MiB, are checked by each instance against what its
// watch has heard). One process holds the registry, an echo target and `instances` dispatchers,
// each with its own task runner on its own connection, in one queue group, all on one bucket, from
// the build of any checkout. One principal makes `total` tasks with `bytes` of arguments,
// `inflight` at once; each ends at once (echo). It prints how many were made and refused, and what
// the principal keeps in the bucket after (records, and bytes as the shares count them: key and
// value). Build the checkout (npm run build), start a nats-server with -js, then:
//   node bench/tasks-shares.mjs <checkout dir> <nats url> <instances> <total> <bytes> [inflight=64]
import { oneProcessStack } from './one-process.mjs';

const [dir, url, instancesArg, totalArg, bytesArg, inflightArg = '64'] = process.argv.slice(2);
const stack = await oneProcessStack(dir, url);
const { load, client, session } = stack;
const { connectBus } = await load('bus/connect.js');
const { Dispatcher } = await load('dispatcher/dispatcher.js');
const { dispatcherMount } = await load('dispatcher/system-dispatcher.js');
const { TaskRunner } = await load('tasks/runner.js');
const { TaskStore } = await load('tasks/store.js');
const bucket = `shares-${stack.tag}`;
const instances = [];
for (let i = 0; i < Number(instancesArg); i++) {
  const nc = await connectBus({ servers: url, name: `instance-${i}` });
  const dispatcher = new Dispatcher(nc, { audit: false });
  const store = await TaskStore.open(nc, { bucket });
  const runner = new TaskRunner(dispatcher, store).start();
  const mount = await dispatcherMount(nc, { dispatcher, tasks: runner }).start();
  instances.push({ nc, dispatcher, store, runner, mount });
}
const owner = { principal: 'agent:shares', session: 's-shares' };
const pad = 'x'.repeat(Number(bytesArg));
const total = Number(totalArg);
let next = 0;
let made = 0;
const refused = {};
const t0 = performance.now();
await Promise.all(
  Array.from({ length: Number(inflightArg) }, async () => {
    while (next < total) {
      const i = next++;
      const r = await client.request(
        'system.dispatcher',
        '$call',
        { session, call: { id: `s${i}`, name: 'echo', arguments: { pad } }, task: {} },
        { ...owner, timeoutMs: 20_000 },
      );
      if (r.task !== undefined) made++;
      else {
        const why = r.content.startsWith('You already have') ? r.content.split(';')[0].slice(0, 60) : r.error?.code;
        refused[why] = (refused[why] ?? 0) + 1;
      }
    }
  }),
);
const floodS = +((performance.now() - t0) / 1000).toFixed(1);
const { store } = instances[0];
// The tasks end at once; the listing is read once they have (a key written during it may be listed twice).
await new Promise((resolve) => setTimeout(resolve, 1_000));
const keys = [...new Set(await store.keysOf(owner))];
let bytes = 0;
for (const key of keys) bytes += (await store.get(key))?.bytes ?? 0;
console.log(
  JSON.stringify({
    dir: dir.split('/').pop(),
    instances: instances.length,
    asked: total,
    argumentBytes: Number(bytesArg),
    made,
    refused,
    floodS,
    kept: { records: keys.length, bytes, MiB: +(bytes / 1048576).toFixed(2) },
  }),
);
for (const { nc, dispatcher, runner, mount } of instances) {
  runner.close();
  await mount.stop();
  dispatcher.close();
  await nc.close();
}
const { Kvm } = await import('@nats-io/kv');
await (await new Kvm(stack.nc).open(bucket)).destroy();
await stack.stop();
