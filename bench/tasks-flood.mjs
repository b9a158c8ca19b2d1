// Issue 41 (High), re-measured: one principal makes tasks with 900 KB arguments in a loop while
// another agent calls the same dispatcher. The service (registry, dispatcher, task runner, echo
// target) runs in a child process from the build of any checkout, so that the commit before the
// fix runs the same harness; this process is the agents. It prints the service's RSS before and
// after (and its peak), the bucket's bytes, the victim's latency and failures, then starts a
// second service on the same bucket and prints how long it took to know every task, and its RSS.
// Build each checkout (npm run build), start a nats-server with -js, then:
//   node bench/tasks-flood.mjs <checkout dir> <nats url> [tasks=110] [argument bytes=900000]
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { oneProcessStack } from './one-process.mjs';

const FLOODER = { principal: 'agent:flood', session: 's-flood' };
const VICTIM = { principal: 'agent:victim', session: 's-victim' };
const [mode, ...rest] = process.argv.slice(2);
if (mode === 'serve') await serve(...rest);
else await attack(mode, ...rest);

/** The service: the stack and a task runner on `bucket`; with `expect`, says when it knows that many tasks. */
async function serve(dir, url, bucket, expect) {
  const stack = await oneProcessStack(dir, url);
  const { load, nc } = stack;
  const { Dispatcher } = await load('dispatcher/dispatcher.js');
  const { dispatcherMount } = await load('dispatcher/system-dispatcher.js');
  const { TaskRunner } = await load('tasks/runner.js');
  const { TaskStore } = await load('tasks/store.js');
  const { tasksMount } = await load('tasks/system-tasks.js');
  const t0 = performance.now();
  const dispatcher = new Dispatcher(nc, { audit: false });
  const runner = new TaskRunner(dispatcher, await TaskStore.open(nc, { bucket })).start();
  await dispatcherMount(nc, { dispatcher, tasks: runner }).start();
  await tasksMount(nc, { runner }).start();
  (async () => {
    for await (const s of nc.status())
      if (s.type === 'disconnect' || s.type === 'error') process.send({ status: s.type });
  })();
  const n = Number(expect ?? 0);
  while (runner.tasksOf(FLOODER).length < n) await new Promise((r) => setTimeout(r, 20));
  process.send({ ready: true, startMs: Math.round(performance.now() - t0), session: stack.session });
}

function rssOf(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name) => Number(status.match(new RegExp(`${name}:\\s+(\\d+)`))?.[1] ?? 0);
  return { rssMB: +(kb('VmRSS') / 1024).toFixed(1), peakMB: +(kb('VmHWM') / 1024).toFixed(1) };
}

function start(dir, url, bucket, expect) {
  const child = fork(new URL(import.meta.url).pathname, ['serve', dir, url, bucket, String(expect)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const statuses = [];
  const ready = new Promise((resolve) => child.on('message', (m) => (m.ready ? resolve(m) : statuses.push(m.status))));
  return { child, ready, statuses };
}

async function attack(dir, url, tasksArg = '110', bytesArg = '900000') {
  const tag = `flood${process.pid}`;
  const bucket = `bench-${tag}`;
  const t0 = performance.now();
  const one = start(dir, url, bucket, 0);
  const { session } = await one.ready;
  // The agents connect as clients only: no registry of their own to answer the session.
  const { connectBus } = await import(`${dir}/dist/src/bus/connect.js`);
  const { BusClient } = await import(`${dir}/dist/src/bus/client.js`);
  const nc = await connectBus({ servers: url });
  const client = new BusClient(nc, { timeoutMs: 10_000 });
  const { jetstreamManager } = await import('@nats-io/jetstream');
  const jsm = await jetstreamManager(nc);
  const bucketMB = async () => +((await jsm.streams.info(`KV_${bucket}`)).state.bytes / 1048576).toFixed(1);
  const call = (who, id, args, task) =>
    client.request(
      'system.dispatcher',
      '$call',
      { session, call: { id, name: 'echo', arguments: args }, ...(task ? { task: {} } : {}) },
      { ...who, timeoutMs: 10_000 },
    );
  for (let i = 0; i < 200; i++) await call(VICTIM, `warm-${i}`, { i }, false);
  const before = { ...rssOf(one.child.pid), bucketMB: await bucketMB() };
  const idle = await victimFor(call, 2_000);
  let flooding = true;
  const during = (async () => {
    const all = { ms: [], failed: 0 };
    while (flooding) {
      const r = await victimFor(call, 500);
      all.ms.push(...r.ms);
      all.failed += r.failed;
    }
    return all;
  })();
  const pad = 'x'.repeat(Number(bytesArg));
  let made = 0;
  const refused = {};
  const f0 = performance.now();
  for (let i = 0; i < Number(tasksArg); i++) {
    try {
      const r = await call(FLOODER, `flood-${i}`, { pad }, true);
      if (r.task) made++;
      else refused[r.error?.code ?? 'none'] = (refused[r.error?.code ?? 'none'] ?? 0) + 1;
    } catch (err) {
      refused[err.code ?? 'thrown'] = (refused[err.code ?? 'thrown'] ?? 0) + 1;
    }
  }
  const floodS = +((performance.now() - f0) / 1000).toFixed(1);
  flooding = false;
  const victim = await during;
  await new Promise((r) => setTimeout(r, 2_000));
  const after = { ...rssOf(one.child.pid), bucketMB: await bucketMB() };
  const keys = (await jsm.streams.info(`KV_${bucket}`, { subjects_filter: '>' })).state.num_subjects ?? 0;
  const two = start(dir, url, bucket, made);
  const second = await Promise.race([
    two.ready,
    new Promise((r) => setTimeout(() => r({ startMs: 'over 60000' }), 60_000)),
  ]);
  const secondRss = rssOf(two.child.pid);
  console.log(
    JSON.stringify({
      dir: dir.split('/').pop(),
      asked: Number(tasksArg),
      argumentBytes: Number(bytesArg),
      made,
      refused,
      floodS,
      keys,
      service: { before, after, connectionEvents: one.statuses },
      victim: { idle: pct(idle.ms), during: { ...pct(victim.ms), failed: victim.failed } },
      second: { startMs: second.startMs, ...secondRss },
      totalS: +((performance.now() - t0) / 1000).toFixed(1),
    }),
  );
  one.child.kill();
  two.child.kill();
  await jsm.streams.delete(`KV_${bucket}`);
  client.close();
  await nc.close();
}

/** The victim's plain calls for `ms`: each one's time, and how many failed. */
async function victimFor(call, ms) {
  const out = { ms: [], failed: 0 };
  const end = performance.now() + ms;
  for (let i = 0; performance.now() < end; i++) {
    const t = performance.now();
    try {
      const r = await call(VICTIM, `v-${i}`, { i }, false);
      if (r.isError) out.failed++;
    } catch {
      out.failed++;
    }
    out.ms.push(performance.now() - t);
  }
  return out;
}

function pct(ms) {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q) => +(s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0).toFixed(1);
  return { calls: s.length, p50: at(0.5), p99: at(0.99) };
}
