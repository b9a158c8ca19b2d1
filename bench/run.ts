/**
 * `npm run bench`: dispatch cost against raw NATS, the pub/sub ceiling, Moleculer and MCP,
 * measured side by side in one run on one machine, and the search's quality, speed against a
 * cached `$resolve` and memory (bench/search.ts, on a nats-server of its own, about 30 s). Starts
 * its own nats-server, prints a table, writes bench/RESULTS.md, and exits 1 when a ratio misses
 * its target.
 *
 * BENCH_SECONDS (default 3) sets how long each scenario runs at each concurrency, in 5
 * interleaved rounds. BENCH_ONLY (a regular expression) runs only the scenarios it matches
 * (targets whose rows are missing are left out; `BENCH_ONLY=search` runs the search's with the
 * yardsticks, as `npm run bench:search` does alone). BENCH_PROFILE (a directory) runs the service
 * under `node --cpu-prof` and writes its profile there when the bench ends.
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { encode } from '@msgpack/msgpack';
import { createInbox, type NatsConnection } from '@nats-io/nats-core';
import { createAccount } from '@nats-io/nkeys';
import { ServiceBroker } from 'moleculer';
import { INDEX_FLUSH_MS } from '../src/audit/indexer.js';
import { BusClient } from '../src/bus/client.js';
import { newTraceparent, writeContext } from '../src/bus/headers.js';
import { Dispatcher } from '../src/dispatcher/dispatcher.js';
import type { ToolResult } from '../src/dispatcher/types.js';
import { mintGrant } from '../src/identity/mint.js';
import type { ListReply, ToolContextSpec } from '../src/registry/types.js';
import { contextWithTools } from './contexts.js';
import { type CpuProbe, type Figures, measureInterleaved, processCpu } from './measure.js';
import { measureOtel, type OtelFigures } from './otel.js';
import { CPU_TABLE_IN_FLIGHT, type Row, render, Scenario } from './report.js';
import { measureSearch, type SearchFigures } from './search.js';
import {
  Account,
  accountEnv,
  buildBase,
  childrenCpu,
  here,
  populate,
  registryRss,
  spawnMcpHost,
  spawnReady,
  startAccountsServer,
  stopChild,
  withUser,
} from './stack.js';

const SECONDS = Number(process.env.BENCH_SECONDS) || 3;
const ROUNDS = 5;
const CONCURRENCY = [1, 64, 256] as const;
/**
 * How long after a slice at 64 in flight its CPU is read: past the trace-id indexer's flush
 * interval, so that the flush of the slice's calls (the index writes, the merges it starts, the
 * acknowledgements) is charged to that slice. Read sooner, a flush landed in the next slices:
 * the audited row's cost went, in part, to the unaudited row read after it.
 */
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? INDEX_FLUSH_MS + 300);
const ONLY = process.env.BENCH_ONLY ? new RegExp(process.env.BENCH_ONLY) : undefined;
/** The OpenTelemetry rows: rounds of the three modes, each mode this long a round, at this many in flight. */
const OTEL = { name: 'OpenTelemetry', rounds: 100, seconds: SECONDS / 30, inFlight: CPU_TABLE_IN_FLIGHT };
/** The search's rows (issue 47): quality, speed and memory at 10k contexts × 10 tools. */
const SEARCH = '$search';
const PROFILE_DIR = process.env.BENCH_PROFILE;
/** main as it stood before the approvals and tasks issues landed. */
const PLAIN_CALL_BASE = 'aced7c4';
/**
 * The commit whose service the plain `$call` is compared with in the same run (`BENCH_BASE`;
 * empty: no comparison): main before the approvals and tasks issues landed.
 */
const BASE = process.env.BENCH_BASE ?? PLAIN_CALL_BASE;

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
const RESULTS = here('../../bench/RESULTS.md');
/**
 * What this run keeps of RESULTS.md: the hand-written notes (from this heading) and the table
 * `npm run bench:scale` writes (from its heading), to the end.
 */
const KEPT_HEADINGS = ['## Notes', '## Growth'];

/** The sections of RESULTS.md this run keeps, as they stand. */
function keptSections(): string {
  let text = '';
  try {
    text = readFileSync(RESULTS, 'utf8');
  } catch {
    return '';
  }
  const at = KEPT_HEADINGS.map((h) => text.indexOf(`\n${h}`)).filter((i) => i >= 0);
  return at.length === 0 ? '' : text.slice(Math.min(...at));
}

async function main(): Promise<void> {
  const children: ChildProcess[] = [];
  const services: ChildProcess[] = [];
  const server = await startAccountsServer();
  const url = server.url;
  const stopAll = async () => {
    for (const c of children) c.kill('SIGKILL');
    // A profiled service writes its profile as it exits: stopped, not killed.
    await Promise.all(services.map((s) => stopChild(s, PROFILE_DIR === undefined ? 'SIGKILL' : 'SIGTERM')));
    await server.stop();
  };
  try {
    const nc = await server.connect(Account.Main, 'bench');
    const trustedNc = await server.connect(Account.Trust, 'bench-trusted');
    const gatesNc = await server.connect(Account.Gates, 'bench-gates');
    const unauditedNc = await server.connect(Account.NoAudit, 'bench-unaudited');
    const baseNc = BASE === '' ? undefined : await server.connect(Account.Base, 'bench-base');
    process.stderr.write(`nats-server ${url}; populating KV…\n`);
    const registered = [benchContext, ...Array.from({ length: 10_000 }, (_, i) => smallContext(ctxKey(i), 1))];
    for (const c of [nc, trustedNc, gatesNc, unauditedNc, baseNc])
      if (c !== undefined) await populate(c, 'bench-tools', registered);
    await populate(
      nc,
      'bench-big',
      Array.from({ length: 10_000 }, (_, i) => smallContext(ctxKey(i), 20)),
    );
    const issuer = createAccount();
    const echo = await spawnReady(
      here('./echo.js'),
      { NATS_URL: url, BENCH_USERS: Object.values(Account).join(',') },
      'stdout',
      'ready',
    );
    const relay = await spawnReady(here('./relay.js'), accountEnv(url, Account.Main), 'stdout', 'ready');
    children.push(echo, relay);
    // Every call in the indexed trail: no principal's share sends the bench's events to the
    // overflow stream, which is stored but not indexed.
    const serviceOf = async (account: Account, script: string, env: Record<string, string> = {}, ready = ' ready ') => {
      const child = await spawnReady(
        here(script),
        { ...accountEnv(url, account), MATRIX_TOOLS_BUCKET: 'bench-tools', MATRIX_AUDIT_SHARE: '0', ...env },
        'stderr',
        ready,
        [],
        profileFlags(account),
      );
      services.push(child);
      process.stderr.write(`service (${account}) pid ${child.pid}\n`);
      return child;
    };
    const service = await serviceOf(Account.Main, '../src/main.js');
    const trustedService = await serviceOf(
      Account.Trust,
      './gates.js',
      { MATRIX_TRUSTED_ISSUERS: issuer.getPublicKey() },
      'grant A/B ready',
    );
    const unauditedService = await serviceOf(Account.NoAudit, './unaudited.js');
    const baseService = BASE === '' ? undefined : await serviceOf(Account.Base, buildBase(BASE));
    const moleculerServer = await spawnReady(
      here('./moleculer-server.js'),
      accountEnv(url, Account.Main),
      'stdout',
      'ready',
    );
    const gateway = await spawnReady(here('./mcp-gateway.js'), {}, 'stdout', 'ready');
    children.push(moleculerServer, gateway);
    const [, gatewayPort, gatewayToolPid] = /ready (\d+) (\d+)/.exec(gateway.said) ?? [];
    const mcpHost = await spawnMcpHost(url, Account.Main);
    children.push(mcpHost);

    const client = new BusClient(nc, { timeoutMs: 10_000 });
    const trusted = new BusClient(trustedNc, { timeoutMs: 10_000 });
    const gates = new BusClient(gatesNc, { timeoutMs: 10_000 });
    const unaudited = new BusClient(unauditedNc, { timeoutMs: 10_000 });
    const base = baseNc === undefined ? undefined : new BusClient(baseNc, { timeoutMs: 10_000 });
    // One grant per path, each with the authority the row without a grant asks for.
    const grantFor = (resolve: { profile: string; toolContextRefs: string[] }) =>
      mintGrant(issuer, { principal: 'agent:bench', session: 'bench', resolve, ttlSeconds: 86_400 });
    const callGrant = grantFor(callSession);
    const resolveGrant = grantFor(cachedResolve);
    // What a grant proves, sent as headers to the instance that trusts its callers.
    const granted = { principal: 'agent:bench', session: 'bench' };
    const payload = encode({ q: 'hello' });
    const session = callSession;
    const dispatcher = new Dispatcher(nc, { audit: true });
    // The same without audit events (what the audit trail costs; the protocol requires it).
    const unauditedInProcess = new Dispatcher(nc, { audit: false });
    const molecular = new ServiceBroker({
      nodeID: 'bench-moleculer-client',
      transporter: withUser(url, Account.Main, Account.Main),
      logger: false,
    });
    await molecular.start();
    await molecular.waitForServices(['echo']);
    const mcp = new McpClient({ name: 'bench', version: '1.0.0' });
    const mcpTransport = new StdioClientTransport({
      command: process.execPath,
      args: [here('./mcp-server.js')],
      stderr: 'ignore',
    });
    await mcp.connect(mcpTransport);
    const viaGateway = new McpClient({ name: 'bench-via-gateway', version: '1.0.0' });
    await viaGateway.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${gatewayPort}/mcp`)));
    const cpu: CpuProbe = () => {
      const own = process.cpuUsage();
      return {
        bench: own.user + own.system,
        'nats-server': processCpu(server.pid),
        ...childrenCpu({
          echo,
          relay,
          service,
          'service (grant A/B)': trustedService,
          'service (audit off)': unauditedService,
          [`service (${BASE || 'base'})`]: { pid: baseService?.pid },
          'Moleculer server': moleculerServer,
          'MCP server': { pid: mcpTransport.pid ?? undefined },
          'MCP gateway': gateway,
          'MCP gateway tool server': { pid: Number(gatewayToolPid) },
          'MCP host': mcpHost,
        }),
      };
    };
    const middle = await cursorAt(client, 50);
    const ceiling = ceilingClient(nc, 'bench.echo.$echo', payload);
    // The same, carrying the headers the protocol asks of every call (how much of the gap they are).
    const ceilingWithHeaders = ceilingClient(nc, 'bench.echo.$echo', payload, true);
    // Two chained hops of that: a relay that receives and requests again, as system.dispatcher does, with no work.
    const twoHops = ceilingClient(nc, 'bench.relay.$echo', payload, true);
    const echoCall = () => ({ id: 'c', name: 'echo', arguments: { q: 'hello' } });
    // The MCP rows' echo server behind the host: its context `mcp.bench`, its tool `bench_echo`.
    const hostSession = { profile: 'bench', toolContextRefs: ['mcp.bench'] };
    const viaHost = () =>
      expectOk(
        client.request<ToolResult>('system.dispatcher', '$call', {
          session: hostSession,
          call: { id: 'c', name: 'bench_echo', arguments: { q: 'hello' } },
        }),
      );
    await untilOk(viaHost);
    let uncached = 0;

    const all: Array<[string, () => Promise<unknown>]> = [
      [Scenario.Raw, () => nc.request('bench.echo.$echo', payload, { timeout: 10_000 })],
      [Scenario.Ceiling, ceiling],
      [Scenario.CeilingHeaders, ceilingWithHeaders],
      [Scenario.Relay, twoHops],
      [Scenario.InProcess, () => expectOk(dispatcher.call(session, echoCall()))],
      [Scenario.InProcessUnaudited, () => expectOk(unauditedInProcess.call(session, echoCall()))],
      [
        Scenario.Service,
        () => expectOk(client.request<ToolResult>('system.dispatcher', '$call', { session, call: echoCall() })),
      ],
      [
        Scenario.ServiceUnaudited,
        () => expectOk(unaudited.request<ToolResult>('system.dispatcher', '$call', { session, call: echoCall() })),
      ],
      ...(base === undefined
        ? []
        : ([
            [
              Scenario.ServiceBase,
              () => expectOk(base.request<ToolResult>('system.dispatcher', '$call', { session, call: echoCall() })),
            ],
          ] as Array<[string, () => Promise<unknown>]>)),
      [
        Scenario.CallGranted,
        () =>
          expectOk(
            trusted.request<ToolResult>(
              'system.dispatcher',
              '$call',
              { session, call: echoCall() },
              { grant: callGrant },
            ),
          ),
      ],
      [
        Scenario.CallSameStack,
        () => expectOk(gates.request<ToolResult>('system.dispatcher', '$call', { session, call: echoCall() }, granted)),
      ],
      // The grant's text as a header the trusting instance reads and does not check (no instance
      // sends a grant on to a target): the row with a grant, less the grant's check.
      [
        Scenario.CallGrantBytes,
        () =>
          expectOk(
            gates.request<ToolResult>(
              'system.dispatcher',
              '$call',
              { session, call: echoCall() },
              { ...granted, grant: callGrant },
            ),
          ),
      ],
      [Scenario.Resolve, () => client.request('system.tools', '$resolve', cachedResolve)],
      [
        Scenario.ResolveGranted,
        () => trusted.request('system.tools', '$resolve', cachedResolve, { grant: resolveGrant }),
      ],
      [Scenario.ResolveSameStack, () => gates.request('system.tools', '$resolve', cachedResolve, granted)],
      [
        Scenario.ResolveGrantBytes,
        () => gates.request('system.tools', '$resolve', cachedResolve, { ...granted, grant: resolveGrant }),
      ],
      [
        Scenario.ResolveUncached,
        () =>
          client.request('system.tools', '$resolve', {
            profile: 'bench',
            toolContextRefs: [ctxKey(uncached++ % 10_000), 'bench'],
          }),
      ],
      [Scenario.List, () => client.request('system.tools', '$list', { limit: 100, cursor: middle })],
      [Scenario.Moleculer, () => molecular.call('echo.echo', { q: 'hello' })],
      [Scenario.McpStdio, () => mcp.callTool({ name: 'echo', arguments: { q: 'hello' } })],
      [Scenario.McpGateway, () => expectMcpOk(viaGateway.callTool({ name: 'echo', arguments: { q: 'hello' } }))],
      [Scenario.McpHost, viaHost],
    ];
    // The raw request is every row's yardstick, the relay the dispatcher's: always measured.
    const scenarios = all.filter(
      ([name]) => ONLY === undefined || ONLY.test(name) || name === Scenario.Raw || name === Scenario.Relay,
    );

    const rows: Row[] = [];
    for (const inFlight of CONCURRENCY) {
      const figures = await measureInterleaved(
        scenarios.map(([, op]) => op),
        inFlight,
        SECONDS,
        ROUNDS,
        cpu,
        inFlight === CPU_TABLE_IN_FLIGHT ? SETTLE_MS : 0,
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

    const rss =
      ONLY === undefined
        ? { big: await registryRss(url, 'bench-big'), empty: await registryRss(url, 'bench-empty') }
        : undefined;
    await mcp.close();
    await viaGateway.close();
    await molecular.stop();
    dispatcher.close();
    unauditedInProcess.close();
    for (const c of [client, trusted, gates, unaudited, base]) c?.close();
    for (const c of [nc, trustedNc, gatesNc, unauditedNc, baseNc]) await c?.drain();
    const search = ONLY === undefined || ONLY.test(SEARCH) ? await measureSearchRows() : undefined;

    const report = render(rows, {
      seconds: SECONDS,
      rounds: ROUNDS,
      settleMs: SETTLE_MS,
      partial: ONLY !== undefined,
      base: BASE,
      rss,
      otel: otel === undefined ? undefined : { figures: otel, inFlight: OTEL.inFlight, seconds: OTEL.seconds },
      search,
    });
    process.stdout.write(`${report.markdown}\n`);
    // A partial run (BENCH_ONLY) is for looking at, not the record.
    if (ONLY === undefined) writeFileSync(RESULTS, report.markdown + keptSections());
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

/** The search's figures (bench/search.ts), once the other rows are measured and their clients closed. */
async function measureSearchRows(): Promise<SearchFigures> {
  const figures = await measureSearch(undefined, (line) => process.stderr.write(`${line}\n`));
  const q = figures.quality;
  process.stderr.write(
    `${SEARCH}: recall@5 ${q.recallAt5.toFixed(3)}, MRR ${q.mrr.toFixed(3)}; indexing ${figures.indexMs.toFixed(3)} ms; ${figures.heap.perToolKib.toFixed(2)} KiB a tool; ${figures.seconds.toFixed(1)} s\n`,
  );
  return figures;
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

/** The key of the `i`th registered context. */
function ctxKey(i: number): string {
  return `ctx-${String(i).padStart(5, '0')}`;
}

async function expectMcpOk(result: Promise<object>): Promise<void> {
  if (((await result) as { isError?: unknown }).isError === true) throw new Error('the MCP gateway answered an error');
}

/** Waits (up to 30 s) for `op` to succeed once: a hosted server starts, then its context is registered. */
async function untilOk(op: () => Promise<void>): Promise<void> {
  for (let tries = 0; ; tries++) {
    try {
      return await op();
    } catch (err) {
      if (tries >= 60) throw err;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

async function expectOk(result: Promise<ToolResult>): Promise<void> {
  const r = await result;
  if (r.isError) throw new Error(r.content);
}

/** Node's flags for a service: `--cpu-prof` into BENCH_PROFILE (the trusting one's in a subdirectory) when it is set. */
function profileFlags(account: Account): string[] {
  // For `perf record -e cpu-clock -p <pid>`: JIT-compiled functions by name in /tmp/perf-<pid>.map.
  if (process.env.BENCH_PERF) return ['--perf-basic-prof'];
  if (PROFILE_DIR === undefined) return [];
  return ['--cpu-prof', `--cpu-prof-dir=${account === Account.Main ? PROFILE_DIR : `${PROFILE_DIR}/${account}`}`];
}

await main();
