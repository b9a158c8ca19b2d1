/**
 * `npm run bench:scale`: how the registry grows (issue 16, "Growth"). For each size N (default
 * 1k, 10k, 50k, 100k; `SCALE_SIZES=1000,10000` to choose) it starts a nats-server, writes N
 * contexts of 5 tools each into a bucket (every 10th provides one shared capability), starts
 * `system.tools` on it, and measures: start-up and a second instance's, `$register` at 16 in
 * flight, `$resolve` by refs (uncached), cached, and with the widely provided capability,
 * `$list` pages, the first `$list` / `$introspect` / `requires` resolve after a change against
 * the same op before it, and change propagation. Prints a table and checks the targets at the
 * largest N; exits 1 on a miss. Minutes, not part of `npm test`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient } from '../src/bus/client.js';
import { decodeBody } from '../src/bus/codec.js';
import { connectBus } from '../src/bus/connect.js';
import { CHANGED_EVENTS } from '../src/registry/events.js';
import type { ListReply, ToolContextSpec } from '../src/registry/types.js';
import { startNatsProcess } from '../test/harness/nats-server.js';
import { contextWithTools } from './contexts.js';
import { latencyP50, median } from './measure.js';

const SIZES = (process.env.SCALE_SIZES ?? '1000,10000,50000,100000').split(',').map(Number);
const SHARED = 'shared.capability';
/** Samples of each latency figure (p50 of these). */
const SAMPLES = 200;
/** Changes measured for each "first op after a change" figure. */
const CHANGES = 15;
const REGISTRATIONS = 2_000;
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));
const bucket = 'scale-tools';
const RESULTS = here('../../bench/RESULTS.md');
const GROWTH_HEADING = '## Growth';

const keyOf = (i: number) => `ctx-${String(i).padStart(6, '0')}`;

/** A context of 5 tools; every 10th provides the shared capability. */
function context(key: string, i: number): ToolContextSpec {
  const spec = contextWithTools(key, 5, `Registered context ${key} for the growth benchmark`);
  if (i % 10 === 0) spec.provides = [SHARED];
  return spec;
}

/** One size's figures, in ms unless named otherwise. */
interface Growth {
  n: number;
  startupMs: number;
  secondInstanceMs: number;
  registerPerSecond: number;
  resolveByRefs: number;
  resolveCached: number;
  resolveWide: number;
  listPage: number;
  listAfterChange: number;
  introspect: number;
  introspectAfterChange: number;
  requires: number;
  requiresAfterChange: number;
  propagationMs: number;
}

async function main(): Promise<void> {
  const results: Growth[] = [];
  for (const n of SIZES) {
    results.push(await measureSize(n));
    process.stderr.write(`${JSON.stringify(results.at(-1))}\n`);
  }
  const { text, failed } = render(results);
  process.stdout.write(`${text}\n`);
  writeGrowth(text);
  process.exitCode = failed ? 1 : 0;
}

/** Puts the table in bench/RESULTS.md as its last section, in place of the one before (`npm run bench` keeps it). */
function writeGrowth(table: string): void {
  let results = '';
  try {
    results = readFileSync(RESULTS, 'utf8');
  } catch {
    // No results yet: the section stands alone.
  }
  const at = results.indexOf(`\n${GROWTH_HEADING}`);
  const before = at < 0 ? results : results.slice(0, at);
  const intro = `Run ${new Date().toISOString()} on ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}, by \`npm run bench:scale\`: a nats-server and one \`system.tools\` per size (no dispatcher), the bucket written directly; latencies are p50 at 1 in flight over ${SAMPLES} calls, "after a change" the median of the first op after each of ${CHANGES} \`$register\`s; \`$register\` rate over ${REGISTRATIONS} new contexts.`;
  writeFileSync(RESULTS, `${before.trimEnd()}\n\n${GROWTH_HEADING}\n\n${intro}\n\n${table}\n`);
}

async function measureSize(n: number): Promise<Growth> {
  const nats = await startNatsProcess(['-m', '0']);
  const children: ChildProcess[] = [];
  const nc = await connectBus({ servers: nats.url, name: 'bench-scale' });
  try {
    process.stderr.write(`N = ${n}: writing the bucket…\n`);
    await populate(nc, n);
    const first = await startService(nats.url);
    children.push(first.child);
    const second = await startService(nats.url);
    // Stopped, not killed: a killed instance's queue subscription could still take a request.
    await new Promise((resolve) => {
      second.child.once('exit', resolve);
      second.child.kill('SIGTERM');
    });
    const client = new BusClient(nc, { timeoutMs: 30_000 });
    process.stderr.write(`N = ${n}: started in ${first.ms.toFixed(0)} ms, a second in ${second.ms.toFixed(0)} ms\n`);
    const g = await measureOps(client, nc, n);
    const registerPerSecond = await registrations(client);
    client.close();
    return { n, startupMs: first.ms, secondInstanceMs: second.ms, registerPerSecond, ...g };
  } finally {
    for (const c of children) c.kill('SIGKILL');
    await nc.close();
    await nats.stop();
  }
}

async function measureOps(
  client: BusClient,
  nc: NatsConnection,
  n: number,
): Promise<Omit<Growth, 'n' | 'startupMs' | 'secondInstanceMs' | 'registerPerSecond'>> {
  let i = 0;
  const ref = () => keyOf((i++ * 7919) % n);
  const resolve = (body: object) => client.request('system.tools', '$resolve', body);
  const resolveByRefs = await p50(() => resolve({ profile: 'scale', toolContextRefs: [ref(), ref()] }));
  const cachedBody = { profile: 'scale', toolContextRefs: [keyOf(1), keyOf(n - 1)] };
  const resolveCached = await p50(() => resolve(cachedBody));
  // A new request each time (another ref), so the provider is picked, not read from the cache.
  const wide = () => resolve({ profile: 'scale', toolContextRefs: [ref()], requires: [SHARED] });
  const resolveWide = await p50(wide);
  const middle = await cursorAt(client, Math.floor(n / 200));
  const list = () => client.request<ListReply>('system.tools', '$list', { limit: 100, cursor: middle });
  const listPage = await p50(list);
  const introspectOp = () => client.request('system.tools', '$introspect', {});
  const introspect = await p50(introspectOp);
  let changes = 0;
  // Each change registers a context that provides the capability: a new key, as a stream of registrations brings.
  const change = async () => {
    await client.request('system.tools', '$register', { spec: context(`chg-${n}-${changes++}`, 0) });
  };
  return {
    resolveByRefs,
    resolveCached,
    resolveWide,
    listPage,
    listAfterChange: await firstAfterChange(change, list),
    introspect,
    introspectAfterChange: await firstAfterChange(change, introspectOp),
    requires: resolveWide,
    requiresAfterChange: await firstAfterChange(change, wide),
    propagationMs: await propagation(client, nc, n),
  };
}

/** Median ms of `op` at 1 in flight over `SAMPLES` calls, after a few unmeasured ones. */
const p50 = (op: () => Promise<unknown>) => latencyP50(op, SAMPLES);

/** Median ms of the first `op` after each of `CHANGES` changes (each answered once the instance serves it). */
async function firstAfterChange(change: () => Promise<void>, op: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let k = 0; k < CHANGES; k++) {
    await change();
    const t = performance.now();
    await op();
    times.push(performance.now() - t);
  }
  return median(times);
}

/** Median ms from a `$register` sent to its change event heard by another connection. */
async function propagation(client: BusClient, nc: NatsConnection, n: number): Promise<number> {
  const times: number[] = [];
  for (let k = 0; k < CHANGES; k++) {
    const key = `prop-${n}-${k}`;
    const heard = new Promise<void>((resolve) => {
      const sub = nc.subscribe(CHANGED_EVENTS, {
        callback: (_err, msg) => {
          if ((decodeBody(msg.data) as { key?: unknown }).key === key) {
            sub.unsubscribe();
            resolve();
          }
        },
      });
    });
    await nc.flush();
    const t = performance.now();
    await client.request('system.tools', '$register', { spec: context(key, 1) });
    await heard;
    times.push(performance.now() - t);
  }
  return median(times);
}

/** `$register`s per second at 16 in flight: new contexts, the service's checks included. */
async function registrations(client: BusClient): Promise<number> {
  let next = 0;
  const t = performance.now();
  const worker = async () => {
    while (next < REGISTRATIONS) {
      const i = next++;
      await client.request('system.tools', '$register', { spec: context(`reg-${i}`, i) });
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  return REGISTRATIONS / ((performance.now() - t) / 1000);
}

async function populate(nc: NatsConnection, n: number): Promise<void> {
  const kv = await new Kvm(nc).create(bucket, { history: 1 });
  for (let i = 0; i < n; i += 1000) {
    await Promise.all(
      Array.from({ length: Math.min(1000, n - i) }, (_, k) =>
        kv.put(keyOf(i + k), JSON.stringify(context(keyOf(i + k), i + k))),
      ),
    );
  }
}

async function cursorAt(client: BusClient, page: number): Promise<string | undefined> {
  let cursor: string | undefined;
  for (let k = 0; k < page; k++) {
    const reply: ListReply = await client.request(
      'system.tools',
      '$list',
      cursor === undefined ? { limit: 100 } : { limit: 100, cursor },
    );
    cursor = reply.nextCursor;
  }
  return cursor;
}

/** Starts `system.tools` alone on the bucket; ms from spawn to its ready line. */
function startService(url: string): Promise<{ child: ChildProcess; ms: number }> {
  const t = performance.now();
  const child = spawn(process.execPath, [here('../src/main.js'), '--no-dispatcher', '--no-reference'], {
    env: { ...process.env, NATS_URL: url, MATRIX_TOOLS_BUCKET: bucket },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let seen = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`service not ready: ${seen}`)), 300_000);
    child.stderr?.on('data', (d: Buffer) => {
      seen += d.toString();
      if (seen.includes(' ready ')) {
        clearTimeout(timer);
        resolve({ child, ms: performance.now() - t });
      }
    });
    child.once('exit', (code) => reject(new Error(`service exited with ${code}: ${seen}`)));
  });
}

function render(results: Growth[]): { text: string; failed: boolean } {
  const ms = (v: number) => v.toFixed(2);
  const row = (label: string, f: (g: Growth) => string) => `| ${label} | ${results.map(f).join(' | ')} |`;
  const lines = [
    `| contexts (5 tools each) | ${results.map((g) => g.n.toLocaleString('en')).join(' | ')} |`,
    `|---|${results.map(() => '---').join('|')}|`,
    row('start-up, s', (g) => (g.startupMs / 1000).toFixed(2)),
    row('second instance start-up, s', (g) => (g.secondInstanceMs / 1000).toFixed(2)),
    row('`$register` /s at 16 in flight', (g) => g.registerPerSecond.toFixed(0)),
    row('`$resolve` by refs p50, ms', (g) => ms(g.resolveByRefs)),
    row('`$resolve` cached p50, ms', (g) => ms(g.resolveCached)),
    row('`$resolve` requires a capability N/10 provide, p50 ms', (g) => ms(g.resolveWide)),
    row('`$list` page of 100 p50, ms', (g) => ms(g.listPage)),
    row('first `$list` after a change, ms', (g) => ms(g.listAfterChange)),
    row('`$introspect` p50, ms', (g) => ms(g.introspect)),
    row('first `$introspect` after a change, ms', (g) => ms(g.introspectAfterChange)),
    row('first `requires` resolve after a change, ms', (g) => ms(g.requiresAfterChange)),
    row('change propagation ($register → event heard), ms', (g) => ms(g.propagationMs)),
  ];
  const largest = results.at(-1) as Growth;
  const smallest = results[0] as Growth;
  const targets: Array<[string, number, string, boolean]> = [
    [
      'first `$list` after a change − before, ms',
      largest.listAfterChange - largest.listPage,
      '≤ 2',
      largest.listAfterChange - largest.listPage <= 2,
    ],
    [
      'first `$introspect` after a change − before, ms',
      largest.introspectAfterChange - largest.introspect,
      '≤ 2',
      largest.introspectAfterChange - largest.introspect <= 2,
    ],
    [
      'first `requires` resolve after a change − before, ms',
      largest.requiresAfterChange - largest.requires,
      '≤ 2',
      largest.requiresAfterChange - largest.requires <= 2,
    ],
    [
      `widely provided \`$resolve\` ÷ its ${smallest.n.toLocaleString('en')} figure`,
      largest.resolveWide / smallest.resolveWide,
      '≤ 1.5',
      largest.resolveWide / smallest.resolveWide <= 1.5,
    ],
    ['`$register` /s at 16 in flight', largest.registerPerSecond, '≥ 1000', largest.registerPerSecond >= 1000],
    ['start-up, s', largest.startupMs / 1000, '≤ 5', largest.startupMs <= 5000],
  ];
  const targetLines = [
    `| target at ${largest.n.toLocaleString('en')} contexts | measured | bound | |`,
    '|---|---|---|---|',
    ...targets.map(
      ([what, value, bound, met]) => `| ${what} | ${value.toFixed(2)} | ${bound} | ${met ? 'PASS' : 'MISS'} |`,
    ),
  ];
  return { text: [...lines, '', ...targetLines].join('\n'), failed: !targets.every(([, , , met]) => met) };
}

await main();
