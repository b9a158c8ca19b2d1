/**
 * `npm run bench`: dispatch cost against raw NATS, the pub/sub ceiling, Moleculer and MCP,
 * measured side by side in one run on one machine. Starts its own nats-server, prints a
 * table, writes bench/RESULTS.md, and exits 1 when a ratio misses its target.
 *
 * BENCH_SECONDS (default 3) sets how long each scenario runs at each concurrency, in 5
 * interleaved rounds. BENCH_ONLY (a regular expression) runs only the scenarios it matches
 * (targets whose rows are missing are left out). BENCH_PROFILE (a directory) runs the service
 * under `node --cpu-prof` and writes its profile there when the bench ends.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { encode } from '@msgpack/msgpack';
import { Kvm } from '@nats-io/kv';
import { createInbox, type NatsConnection } from '@nats-io/nats-core';
import { createAccount } from '@nats-io/nkeys';
import { ServiceBroker } from 'moleculer';
import { BusClient } from '../src/bus/client.js';
import { connectBus } from '../src/bus/connect.js';
import { newTraceparent, writeContext } from '../src/bus/context.js';
import { Dispatcher } from '../src/dispatcher/dispatcher.js';
import type { ToolResult } from '../src/dispatcher/types.js';
import { mintGrant } from '../src/identity/mint.js';
import type { ListReply, ToolContextSpec } from '../src/registry/types.js';
import { startNatsProcess } from '../test/harness/nats-server.js';
import { contextWithTools } from './contexts.js';
import { type CpuProbe, type Figures, measureInterleaved, processCpu } from './measure.js';
import { measureOtel, type OtelFigures, otelSection } from './otel.js';

const SECONDS = Number(process.env.BENCH_SECONDS) || 3;
const ROUNDS = 5;
const CONCURRENCY = [1, 64, 256] as const;
const CPU_TABLE_IN_FLIGHT = 64;
const ONLY = process.env.BENCH_ONLY ? new RegExp(process.env.BENCH_ONLY) : undefined;
/** The OpenTelemetry rows: rounds of the three modes, each mode this long a round, at this many in flight. */
const OTEL = { name: 'OpenTelemetry', rounds: 100, seconds: SECONDS / 30, inFlight: CPU_TABLE_IN_FLIGHT };
const PROFILE_DIR = process.env.BENCH_PROFILE;
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));

const echoTool = {
  name: 'echo',
  description: 'echoes q',
  inputSchema: {
    type: 'object' as const,
    additionalProperties: false,
    required: ['q'],
    properties: { q: { type: 'string', minLength: 1 } },
  },
  target: 'bench.echo',
  op: '$echo',
};
const benchContext: ToolContextSpec = {
  key: 'bench',
  title: 'Bench',
  description: 'the benchmark tool',
  matrixTools: [echoTool],
  permissions: { approval: 'never' },
};
const smallContext = (key: string, tools: number): ToolContextSpec => ({
  ...contextWithTools(key, tools, `Registered context ${key} for the benchmark`),
  instructions: 'Use these tools with care.',
});

/** The session of the `$call` rows, and the request of the cached `$resolve` rows. */
const callSession = { profile: 'bench', toolContextRefs: ['bench'] };
const cachedResolve = { profile: 'bench', toolContextRefs: ['ctx-00042', 'ctx-09999', 'bench'] };
const RAW = 'raw nats.js request';
const RESULTS = here('../../bench/RESULTS.md');
/** Where `npm run bench:scale` keeps its table in RESULTS.md: from this heading to the end. */
const GROWTH_HEADING = '## Growth';

/** The growth section of RESULTS.md as it stands (`npm run bench:scale` writes it; this run keeps it). */
function growthSection(): string {
  let text = '';
  try {
    text = readFileSync(RESULTS, 'utf8');
  } catch {
    return '';
  }
  const at = text.indexOf(`\n${GROWTH_HEADING}`);
  return at < 0 ? '' : text.slice(at);
}
const TWO_HOPS = 'ceiling + headers, two hops (relay)';

interface Row {
  scenario: string;
  inFlight: number;
  figures: Figures;
}

async function main(): Promise<void> {
  const children: ChildProcess[] = [];
  const nats = await startNatsProcess(['-m', '0']);
  const url = nats.url;
  let service: ChildProcess | undefined;
  const stopAll = async () => {
    for (const c of children) c.kill('SIGKILL');
    // A profiled service writes its profile as it exits: stopped, not killed.
    if (service !== undefined) await stopChild(service, PROFILE_DIR === undefined ? 'SIGKILL' : 'SIGTERM');
    await nats.stop();
  };
  try {
    const nc = await connectBus({ servers: url, name: 'bench' });
    process.stderr.write(`nats-server ${url}; populating KV…\n`);
    await populate(nc, 'bench-tools', 10_000, 1, [benchContext]);
    await populate(nc, 'bench-big', 10_000, 20, []);

    const trusted = await startTrusted(children);
    const echo = await spawnReady(here('./echo.js'), url, 'stdout', 'ready');
    const relay = await spawnReady(here('./relay.js'), url, 'stdout', 'ready');
    service = await spawnReady(
      here('../src/main.js'),
      url,
      'stderr',
      ' ready ',
      { MATRIX_TOOLS_BUCKET: 'bench-tools' },
      [],
      profileFlags(),
    );
    const moleculerServer = await spawnReady(here('./moleculer-server.js'), url, 'stdout', 'ready');
    children.push(echo, relay, moleculerServer);

    const client = new BusClient(nc, { timeoutMs: 10_000 });
    const payload = encode({ q: 'hello' });
    const session = callSession;
    const dispatcher = new Dispatcher(nc, { audit: true });
    // The same without audit events (what the audit trail costs; the protocol requires it).
    const unaudited = new Dispatcher(nc, { audit: false });
    const molecular = new ServiceBroker({ nodeID: 'bench-moleculer-client', transporter: url, logger: false });
    await molecular.start();
    await molecular.waitForServices(['echo']);
    const mcp = new McpClient({ name: 'bench', version: '1.0.0' });
    const mcpTransport = new StdioClientTransport({
      command: process.execPath,
      args: [here('./mcp-server.js')],
      stderr: 'ignore',
    });
    await mcp.connect(mcpTransport);
    const cpu: CpuProbe = () => {
      const own = process.cpuUsage();
      return {
        bench: own.user + own.system,
        'nats-server': processCpu(nats.pid),
        echo: processCpu(echo.pid),
        relay: processCpu(relay.pid),
        service: processCpu(service?.pid),
        'Moleculer server': processCpu(moleculerServer.pid),
        'MCP server': processCpu(mcpTransport.pid),
        ...trusted.cpu(),
      };
    };
    const middle = await cursorAt(client, 50);
    const ceiling = ceilingClient(nc, 'bench.echo.$echo', payload);
    // The same, carrying the headers the protocol asks of every call (how much of the gap they are).
    const ceilingWithHeaders = ceilingClient(nc, 'bench.echo.$echo', payload, true);
    // Two chained hops of that: a relay that receives and requests again, as system.dispatcher does, with no work.
    const twoHops = ceilingClient(nc, 'bench.relay.$echo', payload, true);
    let uncached = 0;

    const all: Array<[string, () => Promise<unknown>]> = [
      [RAW, () => nc.request('bench.echo.$echo', payload, { timeout: 10_000 })],
      ['ceiling (one inbox, no timer)', ceiling],
      ['ceiling + context headers', ceilingWithHeaders],
      [TWO_HOPS, twoHops],
      [
        'dispatch, in-process library',
        () => expectOk(dispatcher.call(session, { id: 'c', name: 'echo', arguments: { q: 'hello' } })),
      ],
      [
        'dispatch, in-process, audit off',
        () => expectOk(unaudited.call(session, { id: 'c', name: 'echo', arguments: { q: 'hello' } })),
      ],
      [
        'dispatch, via system.dispatcher',
        () =>
          expectOk(
            client.request<ToolResult>('system.dispatcher', '$call', {
              session,
              call: { id: 'c', name: 'echo', arguments: { q: 'hello' } },
            }),
          ),
      ],
      [
        '$call with a cached grant',
        () =>
          expectOk(
            trusted.client.request<ToolResult>(
              'system.dispatcher',
              '$call',
              { session, call: { id: 'c', name: 'echo', arguments: { q: 'hello' } } },
              { grant: trusted.callGrant },
            ),
          ),
      ],
      ['$resolve, cached', () => client.request('system.tools', '$resolve', cachedResolve)],
      [
        '$resolve, cached, with a grant',
        () => trusted.client.request('system.tools', '$resolve', cachedResolve, { grant: trusted.resolveGrant }),
      ],
      [
        '$resolve, uncached, 10k contexts',
        () =>
          client.request('system.tools', '$resolve', {
            profile: 'bench',
            toolContextRefs: [`ctx-${String(uncached++ % 10_000).padStart(5, '0')}`, 'bench'],
          }),
      ],
      ['$list page of 100 of 10k', () => client.request('system.tools', '$list', { limit: 100, cursor: middle })],
      ['Moleculer 0.14 broker.call', () => molecular.call('echo.echo', { q: 'hello' })],
      ['MCP SDK tools/call, stdio', () => mcp.callTool({ name: 'echo', arguments: { q: 'hello' } })],
    ];
    // The raw request is every row's yardstick: always measured.
    const scenarios = all.filter(([name]) => ONLY === undefined || ONLY.test(name) || name === RAW);

    const rows: Row[] = [];
    for (const inFlight of CONCURRENCY) {
      const figures = await measureInterleaved(
        scenarios.map(([, op]) => op),
        inFlight,
        SECONDS,
        ROUNDS,
        cpu,
      );
      for (const [i, [scenario]] of scenarios.entries()) {
        const f = figures[i] as Figures;
        rows.push({ scenario, inFlight, figures: f });
        process.stderr.write(
          `${scenario} @${inFlight}: p50 ${f.p50.toFixed(0)} µs, ${f.rps.toFixed(0)} req/s${f.errors ? `, ${f.errors} errors` : ''}\n`,
        );
      }
    }
    rows.sort(
      (a, b) =>
        scenarios.findIndex(([n]) => n === a.scenario) - scenarios.findIndex(([n]) => n === b.scenario) ||
        a.inFlight - b.inFlight,
    );
    const otel = ONLY === undefined || ONLY.test(OTEL.name) ? await measureOtelRows(dispatcher) : undefined;

    const rss = ONLY === undefined ? await registryRss(url) : undefined;
    await mcp.close();
    await molecular.stop();
    dispatcher.close();
    unaudited.close();
    client.close();
    await nc.drain();
    await trusted.stop();

    const report = render(rows, rss, otel);
    process.stdout.write(`${report.text}\n`);
    // A partial run (BENCH_ONLY) is for looking at, not the record.
    if (ONLY === undefined) writeFileSync(RESULTS, report.markdown + growthSection());
    process.exitCode = report.failed ? 1 : 0;
  } finally {
    await stopAll();
  }
}

/** The OpenTelemetry rows (bench/otel.ts) through the in-process dispatcher with its audit trail. */
async function measureOtelRows(dispatcher: Dispatcher): Promise<OtelFigures> {
  const call = () => expectOk(dispatcher.call(callSession, { id: 'c', name: 'echo', arguments: { q: 'hello' } }));
  const figures = await measureOtel(call, OTEL.inFlight, OTEL.seconds, OTEL.rounds);
  const [a, b, c] = figures.cpuUs.map((us) => us.toFixed(2));
  process.stderr.write(
    `${OTEL.name} @${OTEL.inFlight}: CPU µs per call (a) ${a}, (b) ${b}, (c) ${c}; (b) ÷ (a) ${figures.ratio[1]?.toFixed(3)}\n`,
  );
  return figures;
}

/** Writes `count` contexts of `tools` tools each (plus `extra`) straight into a bucket. */
async function populate(
  nc: NatsConnection,
  bucket: string,
  count: number,
  tools: number,
  extra: ToolContextSpec[],
): Promise<void> {
  const kv = await new Kvm(nc).create(bucket, { history: 1 });
  const specs = [
    ...extra,
    ...Array.from({ length: count }, (_, i) => smallContext(`ctx-${String(i).padStart(5, '0')}`, tools)),
  ];
  for (let i = 0; i < specs.length; i += 500) {
    await Promise.all(specs.slice(i, i + 500).map((s) => kv.put(s.key, JSON.stringify(s))));
  }
}

/** The cursor of page `page` of `$list` (100 a page). */
async function cursorAt(client: BusClient, page: number): Promise<string> {
  let cursor: string | undefined;
  for (let i = 0; i < page; i++) {
    const reply: ListReply = await client.request(
      'system.tools',
      '$list',
      cursor === undefined ? { limit: 100 } : { limit: 100, cursor },
    );
    cursor = reply.nextCursor;
  }
  if (cursor === undefined) throw new Error('fewer pages than expected');
  return cursor;
}

/** The ceiling: one reply subscription, a callback, no per-request timer, no decoding. */
function ceilingClient(
  nc: NatsConnection,
  subject: string,
  payload: Uint8Array,
  contextHeaders = false,
): () => Promise<void> {
  const inbox = `${createInbox()}.`;
  const pending = new Map<string, () => void>();
  let next = 0;
  nc.subscribe(`${inbox}*`, {
    callback: (_err, msg) => {
      const done = pending.get(msg.subject);
      pending.delete(msg.subject);
      done?.();
    },
  });
  return () =>
    new Promise<void>((resolve) => {
      const reply = inbox + (next++).toString(36);
      pending.set(reply, resolve);
      const headers = contextHeaders
        ? writeContext({ traceparent: newTraceparent(), deadline: Date.now() + 30_000 })
        : undefined;
      nc.publish(subject, payload, { reply, headers });
    });
}

async function expectOk(result: Promise<ToolResult>): Promise<void> {
  const r = await result;
  if (r.isError) throw new Error(r.content);
}

/**
 * The same set-up as the rows without grants (its own nats-server, the same bucket contents, an
 * echo target and the service), but the service trusts a grant issuer: one system.dispatcher
 * queue group per server, so the rows with and without grants each reach the service they mean
 * to, and differ only by the grant.
 */
async function startTrusted(children: ChildProcess[]) {
  const nats = await startNatsProcess(['-m', '0']);
  const nc = await connectBus({ servers: nats.url, name: 'bench-trusted' });
  await populate(nc, 'bench-tools', 10_000, 1, [benchContext]);
  const issuer = createAccount();
  const echo = await spawnReady(here('./echo.js'), nats.url, 'stdout', 'ready');
  const service = await spawnReady(
    here('../src/main.js'),
    nats.url,
    'stderr',
    ' ready ',
    { MATRIX_TOOLS_BUCKET: 'bench-tools', MATRIX_TRUSTED_ISSUERS: issuer.getPublicKey() },
    [],
    profileFlags('trusted'),
  );
  children.push(echo);
  const client = new BusClient(nc, { timeoutMs: 10_000 });
  // One grant per path, each with the authority the row without a grant asks for.
  const grantFor = (resolve: { profile: string; toolContextRefs: string[] }) =>
    mintGrant(issuer, { principal: 'agent:bench', session: 'bench', resolve, ttlSeconds: 86_400 });
  return {
    client,
    callGrant: grantFor(callSession),
    resolveGrant: grantFor(cachedResolve),
    cpu: () => ({
      'nats-server (trust)': processCpu(nats.pid),
      'echo (trust)': processCpu(echo.pid),
      'service (trust)': processCpu(service.pid),
    }),
    stop: async () => {
      client.close();
      await nc.drain();
      await stopChild(service, PROFILE_DIR === undefined ? 'SIGKILL' : 'SIGTERM');
      await nats.stop();
    },
  };
}

/** RSS of a registry process serving 10,000 contexts of 20 tools each, and of one serving none. */
async function registryRss(url: string): Promise<{ big: number; empty: number }> {
  const read = async (bucket: string) => {
    const child = await spawnReady(here('../src/main.js'), url, 'stderr', ' ready ', { MATRIX_TOOLS_BUCKET: bucket }, [
      '--no-dispatcher',
    ]);
    await new Promise((r) => setTimeout(r, 500));
    const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
    child.kill('SIGKILL');
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
  };
  return { big: await read('bench-big'), empty: await read('bench-empty') };
}

/** Node's flags for a service: `--cpu-prof` into BENCH_PROFILE (the trusting one's in a subdirectory) when it is set. */
function profileFlags(which: 'main' | 'trusted' = 'main'): string[] {
  if (PROFILE_DIR === undefined) return [];
  return ['--cpu-prof', `--cpu-prof-dir=${which === 'main' ? PROFILE_DIR : `${PROFILE_DIR}/trusted`}`];
}

/** Stops a child with `signal` and waits for it to exit (at most 10 s). */
async function stopChild(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 10_000))]);
}

function spawnReady(
  script: string,
  url: string,
  stream: 'stdout' | 'stderr',
  ready: string,
  env: Record<string, string> = {},
  args: string[] = [],
  nodeFlags: string[] = [],
): Promise<ChildProcess> {
  const child = spawn(process.execPath, [...nodeFlags, script, ...args], {
    env: { ...process.env, ...env, NATS_URL: url },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let seen = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} not ready: ${seen}`)), 60_000);
    child[stream]?.on('data', (d: Buffer) => {
      seen += d.toString();
      if (seen.includes(ready)) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}: ${seen}`)));
  });
}

interface Target {
  what: string;
  /** The measured value: a ratio, or µs of CPU per call. */
  value: number;
  bound: number;
  /** `max`: the value must be at most the bound; `min`: at least. */
  kind: 'max' | 'min';
  /** What this machine allows, where a limit row bounds it (the same ratio for the limit). */
  limit?: number;
}

/** Issue 16's targets, from this run's rows; in a partial run (BENCH_ONLY), those whose rows were not measured are left out. */
function targetsOf(
  get: (scenario: string, inFlight: number) => Figures | undefined,
  otel: OtelFigures | undefined,
): Target[] {
  const rps = (s: string, n = 64) => get(s, n)?.rps ?? NaN;
  const p50 = (s: string) => get(s, 1)?.p50 ?? NaN;
  const ceiling = rps('ceiling (one inbox, no timer)');
  const viaService = 'dispatch, via system.dispatcher';
  const inProcess = 'dispatch, in-process library';
  const targets: Target[] = [
    {
      what: 'system.dispatcher req/s ÷ ceiling (64 in flight)',
      value: rps(viaService) / ceiling,
      bound: 0.33,
      kind: 'min',
      limit: rps(TWO_HOPS) / ceiling,
    },
    {
      what: 'system.dispatcher p50 ÷ raw request (1 in flight)',
      value: p50(viaService) / p50(RAW),
      bound: 1.8,
      kind: 'max',
      limit: p50(TWO_HOPS) / p50(RAW),
    },
    {
      what: 'in-process dispatch, audit on, req/s ÷ ceiling (64 in flight)',
      value: rps(inProcess) / ceiling,
      bound: 0.7,
      kind: 'min',
      limit: rps('ceiling + context headers') / ceiling,
    },
    {
      what: 'in-process dispatch req/s ÷ Moleculer (64 in flight)',
      value: rps(inProcess) / rps('Moleculer 0.14 broker.call'),
      bound: 1.25,
      kind: 'min',
    },
    {
      what: 'in-process dispatch p50 ÷ raw request (1 in flight)',
      value: p50(inProcess) / p50(RAW),
      bound: 1.0,
      kind: 'max',
    },
    {
      what: '$resolve cached: service CPU µs per call (64 in flight)',
      value: get('$resolve, cached', 64)?.cpu?.service ?? NaN,
      bound: 8,
      kind: 'max',
    },
    {
      what: '$resolve uncached, 10k contexts, p50 ÷ raw request (1 in flight)',
      value: p50('$resolve, uncached, 10k contexts') / p50(RAW),
      bound: 1.5,
      kind: 'max',
    },
    {
      what: '$call with a cached grant req/s ÷ without (64 in flight)',
      value: rps('$call with a cached grant') / rps(viaService),
      bound: 0.95,
      kind: 'min',
    },
    {
      what: '$resolve cached with a grant req/s ÷ without (64 in flight)',
      value: rps('$resolve, cached, with a grant') / rps('$resolve, cached'),
      bound: 0.95,
      kind: 'min',
    },
    {
      what: `in-process dispatch CPU per call, OTel API with no SDK ÷ no observer (issue 17; median over ${OTEL.rounds} rounds)`,
      value: otel?.ratio[1] ?? NaN,
      bound: 1.05,
      kind: 'max',
    },
  ];
  // A full run that could not measure one misses it (NaN meets no bound).
  return ONLY === undefined ? targets : targets.filter((t) => Number.isFinite(t.value));
}

function render(
  rows: Row[],
  rss: { big: number; empty: number } | undefined,
  otel: OtelFigures | undefined,
): { text: string; markdown: string; failed: boolean } {
  const get = (scenario: string, inFlight: number) =>
    rows.find((r) => r.scenario === scenario && r.inFlight === inFlight)?.figures;
  const raw = (n: number) => get(RAW, n) as Figures;
  const ceil = (n: number) => get('ceiling (one inbox, no timer)', n)?.rps ?? NaN;
  const header = '| scenario | in flight | p50 µs | p99 µs | req/s | p50 ÷ raw | req/s ÷ raw | req/s ÷ ceiling |';
  const lines = rows.map(
    ({ scenario, inFlight, figures: f }) =>
      `| ${scenario} | ${inFlight} | ${f.p50.toFixed(0)} | ${f.p99.toFixed(0)} | ${f.rps.toFixed(0)}${f.errors ? ` (${f.errors} errors)` : ''} | ${(f.p50 / raw(inFlight).p50).toFixed(2)} | ${(f.rps / raw(inFlight).rps).toFixed(2)} | ${(f.rps / ceil(inFlight)).toFixed(2)} |`,
  );
  const targets = targetsOf(get, otel);
  const cpuAt = CPU_TABLE_IN_FLIGHT;
  const processes = Object.keys(rows.find((r) => r.figures.cpu !== undefined)?.figures.cpu ?? {});
  const cpuLines = rows
    .filter((r) => r.inFlight === cpuAt && r.figures.cpu !== undefined)
    .map(({ scenario, figures }) => {
      const cpu = figures.cpu as Record<string, number>;
      const total = processes.reduce((sum, p) => sum + (Number.isFinite(cpu[p]) ? (cpu[p] as number) : 0), 0);
      return `| ${scenario} | ${processes.map((p) => (cpu[p] as number).toFixed(1)).join(' | ')} | ${total.toFixed(1)} |`;
    });
  const met = (t: Target) => (t.kind === 'max' ? t.value <= t.bound : t.value >= t.bound);
  const targetLines = targets.map(
    (t) =>
      `| ${t.what} | ${t.value.toFixed(2)} | ${t.kind === 'max' ? '≤' : '≥'} ${t.bound} | ${t.limit === undefined ? '' : t.limit.toFixed(2)} | ${met(t) ? 'PASS' : 'MISS'} |`,
  );
  const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}`;
  const markdown = [
    '# Benchmark results',
    '',
    `Run ${new Date().toISOString()} on ${machine}; nats-server on loopback, echo target, service and peers each in their own process; ${SECONDS} s per scenario and concurrency, in ${ROUNDS} interleaved rounds. Produced by \`npm run bench\`.`,
    '',
    header,
    '|---|---|---|---|---|---|---|---|',
    ...lines,
    '',
    `## CPU per call at ${cpuAt} in flight`,
    '',
    'µs of CPU each process spent per completed call (from `/proc` and `process.cpuUsage`, whole rounds); the bench process is the caller: raw request, ceiling, the in-process dispatcher, and the Moleculer and MCP clients run in it. With every process on the same cores, the total bounds throughput.',
    '',
    `| scenario | ${processes.join(' | ')} | total |`,
    `|---|${processes.map(() => '---').join('|')}|---|`,
    ...cpuLines,
    '',
    ...(otel === undefined ? [] : otelSection(otel, OTEL.inFlight, OTEL.seconds)),
    '## Targets (issues 16 and 17, from this run)',
    '',
    'The limit is what this box allows for the same figure: the ceiling with context headers for one hop, through the relay for two.',
    '',
    '| target | measured | bound | limit | |',
    '|---|---|---|---|---|',
    ...targetLines,
    '',
    ...(rss === undefined
      ? []
      : [
          '## Memory',
          '',
          `Registry RSS with 10,000 registered contexts of 20 tools each: ${rss.big.toFixed(0)} MiB (with none: ${rss.empty.toFixed(0)} MiB).`,
          '',
        ]),
  ].join('\n');
  return { text: markdown, markdown, failed: !targets.every(met) };
}

await main();
