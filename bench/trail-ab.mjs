// A/B of what the audit trail costs a system.dispatcher.$call (issue 25), summed over processes.
// Each stack is a nats-server of its own (with -js, on 127.0.0.1) and one service process given
// as "name=script [args]"; the caller and the echo target run here. Stacks take turns, round by
// round: 64 calls in flight (TRAIL_AB_IN_FLIGHT), then 2.2 s for the trail's batches and the
// trace-id indexer's 2 s flush to land in the slice; each line is CPU per call from /proc
// (nats-server, service) and process.cpuUsage (caller + echo), the median latency, and the
// service's read and write syscalls per call (/proc/<pid>/io). Build the checkout first
// (npm run build), then e.g.:
//   node bench/trail-ab.mjs . 8 20000 on=dist/src/main.js 'noref=dist/src/main.js --no-reference' \
//     off=dist/bench/unaudited.js
// A stack named relay… runs the two-hop relay (relay=dist/bench/relay.js), sent the same body raw.
//
// TRAIL_AB_CALLGRIND=<dir> runs each service under valgrind's callgrind and prints, per round,
// the instructions its process ran per call (those of an idle stretch as long as the round
// subtracted): a count that does not drift with the box's speed. Each round's dump is left in
// <dir> as cg-<name>.out.<n> (the odd ones the rounds, the even ones their idle stretches); give
// the service `--perf-basic-prof` and `node bench/callgrind-categories.mjs` names its JIT code.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [dir, rounds, calls, ...specs] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(join(dir, 'dist', p)).href);
const { connectBus } = await load('src/bus/connect.js');
const { BusClient } = await load('src/bus/client.js');
const { populate } = await load('bench/stack.js');
const { contextWithTools } = await load('bench/contexts.js');
const { processCpu: cpuUs } = await load('bench/measure.js');
// TRAIL_AB_CONTEXTS=10000 registers as many one-tool contexts beside the echo, as `npm run bench` does.
const extra = Array.from({ length: Number(process.env.TRAIL_AB_CONTEXTS ?? 0) }, (_, i) =>
  contextWithTools(`ctx-${String(i).padStart(5, '0')}`, 1, `Registered context ${i} for the benchmark`),
);
const io = (pid) => {
  const fields = readFileSync(`/proc/${pid}/io`, 'utf8').split('\n');
  const get = (name) => Number(fields.find((f) => f.startsWith(`${name}:`))?.split(' ')[1]);
  return { reads: get('syscr'), writes: get('syscw') };
};
const IN_FLIGHT = Number(process.env.TRAIL_AB_IN_FLIGHT ?? 64);
const CALLGRIND = process.env.TRAIL_AB_CALLGRIND;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const echo = {
  key: 'bench',
  title: 'Bench',
  description: 'the benchmark tool',
  permissions: { approval: 'never' },
  matrixTools: [
    {
      name: 'echo',
      description: 'echoes q',
      inputSchema: {
        type: 'object',
        additionalProperties: false,
        required: ['q'],
        properties: { q: { type: 'string' } },
      },
      target: 'bench.echo',
      op: '$echo',
    },
  ],
};

const stacks = [];
let port = 4310 + (process.pid % 50) * 10;
for (const spec of specs) {
  const [name, command] = spec.split('=');
  const store = mkdtempSync(join(tmpdir(), 'trail-ab-'));
  const server = spawn('nats-server', ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', store], {
    stdio: 'ignore',
  });
  await sleep(600);
  const url = `nats://127.0.0.1:${port++}`;
  const nc = await connectBus({ servers: url });
  await populate(nc, 'trail-ab-tools', [echo, ...extra]);
  nc.subscribe('bench.echo.*', { queue: 'echo', callback: (_err, msg) => msg.respond(msg.data) });
  const argv = [process.execPath, ...command.split(' ')];
  if (CALLGRIND)
    argv.unshift('valgrind', '--tool=callgrind', `--callgrind-out-file=${join(CALLGRIND, `cg-${name}.out`)}`);
  const service = spawn(argv[0], argv.slice(1), {
    env: { ...process.env, NATS_URL: url, MATRIX_TOOLS_BUCKET: 'trail-ab-tools' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  await new Promise((resolve, reject) => {
    let said = '';
    // The service says it is ready on stderr, the relay on stdout.
    const hear = (d) => {
      said += d;
      if (/\bready\b/.test(said)) resolve();
    };
    service.stderr.on('data', hear);
    service.stdout.on('data', hear);
    service.on('exit', (code) => reject(new Error(`${name} exited ${code}: ${said}`)));
  });
  stacks.push({ name, server, service, nc, store, client: new BusClient(nc, { timeoutMs: 10_000 }) });
}

const session = { profile: 'bench', toolContextRefs: ['bench'] };
const call = { id: 'c', name: 'echo', arguments: { q: 'hello' } };
const raw = new TextEncoder().encode(JSON.stringify({ session, call }));
/** Makes `n` calls, IN_FLIGHT at a time; resolves to their latencies in µs, sorted. */
async function run(stack, n) {
  let next = 0;
  const latencies = [];
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next++ < n) {
        const started = performance.now();
        if (stack.name.startsWith('relay')) await stack.nc.request('bench.relay.$call', raw, { timeout: 10_000 });
        else {
          const result = await stack.client.request('system.dispatcher', '$call', { session, call });
          if (result.isError) throw new Error(JSON.stringify(result));
        }
        latencies.push((performance.now() - started) * 1000);
      }
    }),
  );
  return latencies.sort((a, b) => a - b);
}

/** The instructions `stack`'s service runs while `work` does, from a zeroed count to a dump. */
async function instructions(stack, work) {
  const pid = String(stack.service.pid);
  const prefix = `cg-${stack.name}.out.`;
  const newest = () =>
    Math.max(
      0,
      ...readdirSync(CALLGRIND).flatMap((f) => (f.startsWith(prefix) ? [Number(f.slice(prefix.length))] : [])),
    );
  const last = newest();
  execFileSync('callgrind_control', ['-z', pid], { stdio: 'ignore' });
  const result = await work();
  execFileSync('callgrind_control', ['-d', pid], { stdio: 'ignore' });
  // The service's thread writes the dump after the request: wait for its last line (totals).
  for (;;) {
    const at = newest();
    const dump = at > last ? readFileSync(join(CALLGRIND, `${prefix}${at}`), 'utf8') : '';
    if (/^totals: /m.test(dump)) return { count: Number(/^summary: (\d+)/m.exec(dump)?.[1]), result };
    await sleep(100);
  }
}

try {
  // TRAIL_AB_WARMUP: calls each stack makes first (under callgrind, V8 is still compiling the
  // service's warm path 5,000 calls in; ~12,000 settle it).
  for (const stack of stacks) await run(stack, Number(process.env.TRAIL_AB_WARMUP ?? 3000));
  const n = Number(calls);
  for (let round = 0; round < Number(rounds); round++)
    for (const stack of stacks) {
      if (CALLGRIND) {
        let lasted = 0;
        const busy = await instructions(stack, async () => {
          const started = performance.now();
          const latencies = await run(stack, n);
          await sleep(2200);
          lasted = performance.now() - started;
          return latencies;
        });
        const idle = await instructions(stack, () => sleep(lasted));
        const row = { name: stack.name, round, perCall: Math.round((busy.count - idle.count) / n) };
        row.idlePerCall = Math.round(idle.count / n);
        row.p50 = Math.round(busy.result[busy.result.length >> 1]);
        console.log(JSON.stringify(row));
        continue;
      }
      await sleep(300);
      const before = [process.cpuUsage(), cpuUs(stack.server.pid), cpuUs(stack.service.pid), io(stack.service.pid)];
      const started = performance.now();
      const latencies = await run(stack, n);
      const seconds = (performance.now() - started) / 1000;
      await sleep(2200);
      const own = process.cpuUsage(before[0]);
      const after = io(stack.service.pid);
      const row = {
        name: stack.name,
        round,
        rps: Math.round(n / seconds),
        caller: (own.user + own.system) / n,
        server: (cpuUs(stack.server.pid) - before[1]) / n,
        service: (cpuUs(stack.service.pid) - before[2]) / n,
      };
      row.total = row.caller + row.server + row.service;
      row.p50 = latencies[latencies.length >> 1];
      row.reads = (after.reads - before[3].reads) / n;
      row.writes = (after.writes - before[3].writes) / n;
      const rounded = Object.entries(row).map(([k, v]) => [k, typeof v === 'number' ? Math.round(v * 10) / 10 : v]);
      console.log(JSON.stringify(Object.fromEntries(rounded)));
    }
} finally {
  for (const stack of stacks) {
    stack.service.kill('SIGKILL');
    stack.client.close();
    await stack.nc.close();
    stack.server.kill();
    rmSync(stack.store, { recursive: true, force: true });
  }
}
