/**
 * `npm run soak`: mixed traffic against its own nats-server and service for SOAK_SECONDS
 * (default 600), printing every 10 s the calls, errors by code and the service's RSS.
 * Exits 1 if any call that should succeed failed, or if RSS grew by more than a quarter after
 * warming up (from the first sample past a fifth of the run to the last).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { BusClient } from '../src/bus/client.js';
import { connectBus } from '../src/bus/connect.js';
import { MatrixError } from '../src/bus/errors.js';
import { Dispatcher } from '../src/dispatcher/dispatcher.js';
import type { ToolResult } from '../src/dispatcher/types.js';
import { startNatsProcess } from '../test/harness/nats-server.js';

const SECONDS = Number(process.env.SOAK_SECONDS) || 600;
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));

function spawnReady(args: string[], url: string, stream: 'stdout' | 'stderr', ready: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, args, {
    env: { ...process.env, NATS_URL: url, MATRIX_TOOLS_BUCKET: 'soak-tools' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let seen = '';
  return new Promise((resolve, reject) => {
    child[stream]?.on('data', (d: Buffer) => {
      seen += d.toString();
      if (seen.includes(ready)) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`${args[0]} exited with ${code}: ${seen}`)));
  });
}

const rss = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;

async function main(): Promise<void> {
  const nats = await startNatsProcess();
  const echo = await spawnReady([here('./echo.js')], nats.url, 'stdout', 'ready');
  const service = await spawnReady([here('../src/cli/main.js'), 'serve'], nats.url, 'stderr', ' ready ');
  const nc = await connectBus({ servers: nats.url });
  const client = new BusClient(nc, { timeoutMs: 5_000 });
  const dispatcher = new Dispatcher(nc);
  const echoSpec = {
    key: 'soak-echo',
    title: 'Echo',
    description: 'echo',
    matrixTools: [
      { name: 'echo', description: 'echo', inputSchema: { type: 'object' }, target: 'bench.echo', op: '$echo' },
    ],
    permissions: { approval: 'never' },
  };
  await client.request('system.tools', '$register', { spec: echoSpec });
  const session = { profile: 'p', toolContextRefs: ['soak-echo', 'actor-readonly'] };

  let n = 0;
  const mix: Array<[string, boolean, () => Promise<unknown>]> = [
    [
      'dispatch (library)',
      true,
      () => dispatcher.call(session, { id: 'a', name: 'echo', arguments: { i: n++ } }).then(mustSucceed),
    ],
    [
      'dispatch (mount)',
      true,
      () =>
        client
          .request<ToolResult>('system.dispatcher', '$call', {
            session,
            call: { id: 'b', name: 'echo', arguments: { i: n++ } },
          })
          .then(mustSucceed),
    ],
    [
      '$resolve',
      true,
      () => client.request('system.tools', '$resolve', { profile: 'default', skills: [{ name: `s${n++ % 50}` }] }),
    ],
    ['$list', true, () => client.request('system.tools', '$list', { limit: 50 })],
    [
      'register churn',
      true,
      async () => {
        const key = `soak-${n++}`;
        await client.request('system.tools', '$register', { spec: { ...echoSpec, key } });
        await client.request('system.tools', '$unregister', { key });
      },
    ],
    ['bad request', false, () => client.request('system.tools', '$resolve', { profile: 42 })],
    ['unknown tool', true, () => dispatcher.call(session, { id: 'c', name: 'nope' })],
    [
      'trace query',
      true,
      () =>
        client.request<{ matched: number }>('system.traces', '$query', { tool: 'echo', limit: 5 }).then(mustHaveFound),
    ],
  ];
  // A model asks for traces now and then, not as often as it calls tools: 1 pick in ~160.
  const weights = mix.map(([name]) => (name === 'trace query' ? 0.05 : 1));
  const totalWeight = weights.reduce((a, b) => a + b, 0);
  const pick = (): (typeof mix)[number] => {
    let r = Math.random() * totalWeight;
    for (const [i, w] of weights.entries()) if ((r -= w) < 0) return mix[i] as (typeof mix)[number];
    return mix[0] as (typeof mix)[number];
  };
  const mustHaveFound = (r: { matched: number }) => {
    if (r.matched === 0) throw new Error('system.traces holds no echo call');
  };
  // Trace queries expect echo calls on record: make one and wait until system.traces has it.
  await dispatcher.call(session, { id: 'first', name: 'echo', arguments: {} }).then(mustSucceed);
  for (
    let waited = 0;
    (await client.request<{ matched: number }>('system.traces', '$query', { tool: 'echo' })).matched === 0;
    waited += 20
  ) {
    if (waited > 5_000) throw new Error('system.traces never heard of the first call');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const calls = new Map<string, number>();
  const errors = new Map<string, number>();
  let unexpected = 0;
  let running = true;
  const worker = async () => {
    while (running) {
      const [name, shouldSucceed, op] = pick();
      calls.set(name, (calls.get(name) ?? 0) + 1);
      try {
        await op();
        if (!shouldSucceed) unexpected++;
      } catch (err) {
        const code = `${name}: ${err instanceof MatrixError ? err.code : (err as Error).message}`;
        errors.set(code, (errors.get(code) ?? 0) + 1);
        if (shouldSucceed) unexpected++;
      }
    }
  };
  const workers = Array.from({ length: 32 }, worker);
  const started = Date.now();
  const firstRss = rss(service.pid as number);
  let lastRss = firstRss;
  let warmRss: number | undefined;
  console.log(`soak for ${SECONDS} s; service RSS at start ${firstRss.toFixed(0)} MiB`);
  while (Date.now() - started < SECONDS * 1000) {
    await new Promise((r) => setTimeout(r, Math.min(10_000, SECONDS * 1000 - (Date.now() - started))));
    lastRss = rss(service.pid as number);
    if (warmRss === undefined && Date.now() - started >= SECONDS * 200) warmRss = lastRss;
    const total = [...calls.values()].reduce((a, b) => a + b, 0);
    const errs = [...errors].map(([k, v]) => `${k} ${v}`).join('; ') || 'none';
    console.log(
      `${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s  calls ${total}  unexpected ${unexpected}  RSS ${lastRss.toFixed(0)} MiB  errors: ${errs}`,
    );
  }
  running = false;
  await Promise.all(workers);
  dispatcher.close();
  client.close();
  await nc.drain();
  service.kill('SIGTERM');
  echo.kill('SIGTERM');
  await nats.stop();
  const grew = lastRss / (warmRss ?? firstRss);
  console.log(
    `done: ${unexpected} unexpected outcomes; RSS ${firstRss.toFixed(0)} at start, ${(warmRss ?? firstRss).toFixed(0)} warm, ${lastRss.toFixed(0)} MiB at the end (×${grew.toFixed(2)} since warm)`,
  );
  process.exitCode = unexpected > 0 || grew > 1.25 ? 1 : 0;
}

function mustSucceed(result: ToolResult): void {
  if (result.isError) throw new Error(`tool error ${result.error?.code}`);
}

await main();
