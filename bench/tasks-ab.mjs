// A/B of the plain system.dispatcher.$call warm path, issue 24 (tasks): one process holds the caller,
// the registry, the dispatcher (with a task runner when told) and an echo target; it prints the wall
// time and the process CPU per call. Build each checkout (npm run build), start a nats-server with
// -js, then alternate: node bench/tasks-ab.mjs <checkout dir> <nats url> <calls> [tasks]
import { oneProcessStack, perCall } from './one-process.mjs';

const [dir, url, n, withTasks] = process.argv.slice(2);
const stack = await oneProcessStack(dir, url);
const { load, nc, client, session } = stack;
const { dispatcherMount } = await load('dispatcher/system-dispatcher.js');
const { Dispatcher } = await load('dispatcher/dispatcher.js');
const dispatcher = new Dispatcher(nc, { audit: false });
let tasksOpts = {};
let runner;
if (withTasks === 'tasks') {
  const { TaskRunner } = await load('tasks/runner.js');
  const { TaskStore } = await load('tasks/store.js');
  runner = new TaskRunner(dispatcher, await TaskStore.open(nc, { bucket: `ab-tasks-${stack.tag}` })).start();
  tasksOpts = { tasks: runner };
}
const mount = await dispatcherMount(nc, { dispatcher, ...tasksOpts }).start();
const call = (i) =>
  client.request('system.dispatcher', '$call', { session, call: { id: `c${i}`, name: 'echo', arguments: { i } } });
const measured = await perCall(call, Number(n));
console.log(JSON.stringify({ dir: dir.split('/').pop(), tasks: withTasks === 'tasks', ...measured }));
runner?.close();
await mount.stop();
dispatcher.close();
await stack.stop();
