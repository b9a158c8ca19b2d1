// Rough measure (not a test): does a target answering with large replies slow another caller's
// small calls, and by how much? Plain nats-server (JetStream, no auth), the built service
// (`npm run build` first), an honest mount app.spy answering at once, and a hostile mount app.big
// (test/harness/big-flooder.mjs, its own process) answering each call with one reply of ~1 MiB
// after `delayMs`. A victim calls spy_run in a loop, idle and while `lanes` callers each call
// big_reply in a loop (`lanes` large replies in flight at once). Prints the victim's p50/p99,
// its failures, nats-server's slow-consumer cuts and the service's peak RSS.
// TEXT=1: the reply's padding is a string, not bytes.
// Usage: node bench/attack-large-replies.mjs [lanes=64] [bytes=1040000] [delayMs=200] [seconds=5]
import { spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { connect } from '@nats-io/transport-node';
import { BusClient } from '../dist/src/bus/client.js';

const [lanes = 64, bytes = 1_040_000, delayMs = 200, seconds = 5] = process.argv.slice(2).map(Number);
const natsBin = process.env.NATS_SERVER_BIN ?? '/var/cache/matrix-tool-registry/nats/nats-server-2.15.3/nats-server';
const root = fileURLToPath(new URL('..', import.meta.url));
const children = [];
const storeDirs = [];
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
  for (const dir of storeDirs) rmSync(dir, { recursive: true, force: true });
});

function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Spawns `args`, resolving once its `stream` says `ready`. */
function start(cmd, args, ready, stream, env = {}) {
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not ready: ${out}`)), 30_000);
    child[stream].on('data', (d) => {
      out += d;
      if (out.includes(ready)) {
        clearTimeout(timer);
        resolve(child);
      }
    });
  });
}

const quantile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;
};

const port = await freePort();
const monitor = await freePort();
await start(
  natsBin,
  ['-p', String(port), '-m', String(monitor), '-js', '-sd', `/tmp/attack41-js-${port}`],
  'Server is ready',
  'stderr',
);
const url = `nats://127.0.0.1:${port}`;
const varz = async () => (await fetch(`http://127.0.0.1:${monitor}/varz`)).json();
// PROFILE=<dir>: the service writes a CPU profile there when it stops.
const profile = process.env.PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.PROFILE}`] : [];
const service = await start(
  process.execPath,
  [...profile, `${root}dist/src/cli/main.js`, 'serve'],
  ' ready ',
  'stderr',
  {
    NATS_URL: url,
  },
);
const rssOf = () => {
  const status = readFileSync(`/proc/${service.pid}/status`, 'utf8');
  return {
    rss: Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]) / 1024,
    peak: Number(/VmHWM:\s+(\d+)/.exec(status)?.[1]) / 1024,
  };
};
await start(
  process.execPath,
  [
    `${root}test/harness/big-flooder.mjs`,
    JSON.stringify({ servers: url, mount: 'app.big', bytes, delayMs, reports: 0, text: process.env.TEXT === '1' }),
  ],
  'mounted',
  'stdout',
);
const spyNc = await connect({ servers: url });
spyNc.subscribe('app.spy.*', { callback: (_e, msg) => msg.respond(new Uint8Array([0x80])) });
await spyNc.flush();

const nc = await connect({ servers: url });
const client = new BusClient(nc, { timeoutMs: 60_000 });
const tool = (name, target, op) => ({ name, description: name, inputSchema: { type: 'object' }, target, op });
await client.request('system.tools', '$register', {
  spec: {
    key: 'attack-tools',
    title: 'Attack',
    description: 'an honest and a hostile mount',
    matrixTools: [tool('spy_run', 'app.spy', '$run'), tool('big_reply', 'app.big', '$big')],
    permissions: { approval: 'never' },
  },
});
const session = { profile: 'default', toolContextRefs: ['attack-tools'] };
const call = (name, c = client) =>
  c.request('system.dispatcher', '$call', { session, call: { id: 'x', name, arguments: {} } }, { timeoutMs: 60_000 });

async function victimFor(ms) {
  const times = [];
  const failures = [];
  const until = performance.now() + ms;
  while (performance.now() < until) {
    const t = performance.now();
    const r = await call('spy_run');
    if (r.isError) failures.push(r.content.slice(0, 160));
    times.push(performance.now() - t);
  }
  return { times, failures };
}

for (let i = 0; i < 50; i++) await call('spy_run');
const idle = await victimFor(3_000);
const before = await varz();
const rssBefore = rssOf();
// The attacker on a connection of its own, `lanes` calls in flight at all times.
const attackerNc = await connect({ servers: url });
const attacker = new BusClient(attackerNc, { timeoutMs: 60_000 });
let running = true;
let answered = 0;
let failed = 0;
const laneRuns = Array.from({ length: lanes }, async () => {
  while (running) {
    const r = await call('big_reply', attacker).catch((e) => ({ isError: true, content: String(e) }));
    if (r.isError) failed++;
    else answered++;
  }
});
await new Promise((r) => setTimeout(r, 500));
const under = await victimFor(seconds * 1000);
running = false;
await Promise.all(laneRuns);
const after = await varz();
const rssAfter = rssOf();
const closed = await (await fetch(`http://127.0.0.1:${monitor}/connz?state=closed`)).json();
const cutNames = (closed.connections ?? [])
  .filter((c) => /slow consumer/i.test(c.reason ?? ''))
  .map((c) => c.name ?? `cid ${c.cid}`);
const fmt = (v) => v.toFixed(1);
console.log(
  `lanes ${lanes}, reply ${bytes} B of ${process.env.TEXT === '1' ? 'text' : 'bytes'}, delay ${delayMs} ms: victim idle p50 ${fmt(quantile(idle.times, 0.5))} p99 ${fmt(quantile(idle.times, 0.99))} ms (${idle.times.length} calls); under attack p50 ${fmt(quantile(under.times, 0.5))} p99 ${fmt(quantile(under.times, 0.99))} max ${fmt(Math.max(...under.times))} ms (${under.times.length} calls, ${under.failures.length} failed${under.failures.length ? `: ${under.failures[0]}` : ''}); attacker ${answered} answered, ${failed} failed; nats-server slow-consumer cuts ${after.slow_consumers - before.slow_consumers} (${cutNames.join(', ')}), ${((after.out_bytes - before.out_bytes) / 2 ** 20).toFixed(0)} MiB sent; service RSS ${fmt(rssBefore.rss)} -> ${fmt(rssAfter.rss)} MiB (peak ${fmt(rssAfter.peak)})`,
);
if (profile.length > 0) {
  const exited = new Promise((resolve) => service.once('exit', resolve));
  service.kill('SIGTERM');
  await exited;
}
process.exit(0);
