// What making a task costs (issue 41, live-task slots): one process holds the caller, the
// registry, the dispatcher with a task runner and an echo target, from the build of any checkout,
// so the commit before a change runs the same harness. It makes `total` tasks of one principal
// by `system.dispatcher.$call` with `task`, `inflight` at once (a principal each: the live
// bound, 32, is one principal's, and ends lag creations), each ending at once (echo), and
// prints the wall time per creation (the `$call` answered with its task) and the process CPU per
// task (its creation, its run and its end). The principals' record and byte shares are raised
// out of the way. Build each checkout (npm run build), start a
// nats-server with -js, then alternate:
//   node bench/task-create-cost.mjs <checkout dir> <nats url> <total> [inflight=1]
import { oneProcessStack } from './one-process.mjs';

const [dir, url, n, inflightArg = '1'] = process.argv.slice(2);
const total = Number(n);
const inflight = Number(inflightArg);
const stack = await oneProcessStack(dir, url);
const { load, nc, client, session } = stack;
const { dispatcherMount } = await load('dispatcher/system-dispatcher.js');
const { Dispatcher } = await load('dispatcher/dispatcher.js');
const { TaskRunner } = await load('tasks/runner.js');
const { TaskStore } = await load('tasks/store.js');
const { Kvm } = await import('@nats-io/kv');
const bucket = `cost-tasks-${stack.tag}`;
const dispatcher = new Dispatcher(nc, { audit: false });
const runner = new TaskRunner(dispatcher, await TaskStore.open(nc, { bucket }), {
  maxRecordsPerPrincipal: 1e9,
  maxBytesPerPrincipal: 1e12,
}).start();
const mount = await dispatcherMount(nc, { dispatcher, tasks: runner }).start();
const make = async (i, lane) => {
  const reply = await client.request(
    'system.dispatcher',
    '$call',
    { session, call: { id: `c${i}`, name: 'echo', arguments: { i } }, task: { ttlMs: 60_000 } },
    { principal: `agent:cost-${lane}`, session: `s-cost-${lane}` },
  );
  if (reply.task === undefined) throw new Error(`task ${i} refused: ${reply.content}`);
};
/** `count` tasks, `inflight` at once; wall ms. */
const run = async (count) => {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: inflight }, async (_, lane) => {
      while (next < count) await make(next++, lane);
    }),
  );
  return performance.now() - t0;
};
await run(Math.min(500, total));
const cpu0 = process.cpuUsage();
const ms = await run(total);
const cpu = process.cpuUsage(cpu0);
console.log(
  JSON.stringify({
    dir: dir.split('/').pop(),
    tasks: total,
    inflight,
    usPerCreation: +((ms * 1000) / total).toFixed(1),
    cpuUsPerTask: +((cpu.user + cpu.system) / total).toFixed(1),
  }),
);
runner.close();
await mount.stop();
dispatcher.close();
await (await new Kvm(nc).open(bucket)).destroy();
await stack.stop();
