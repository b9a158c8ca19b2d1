/**
 * The files a warm `$call` runs code in: V8 precise coverage of one call through
 * `system.dispatcher` (a cached session, no approval) to a plain NATS target, from the request
 * to its audit batch on the wire, counting each file of `src/` with a function that ran.
 * docs/architecture.md lists them; this file holds that list true and the walk within its
 * bound, on a NATS server of its own.
 */
import { readFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { decode, encode } from '@msgpack/msgpack';
import { headers, type NatsConnection } from '@nats-io/nats-core';
import { createAccount } from '@nats-io/nkeys';
import { trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CALL_EVENTS } from '../../src/audit/log.js';
import { connectBus } from '../../src/bus/connect.js';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import { IdentityGate } from '../../src/identity/gate.js';
import { mintGrant } from '../../src/identity/mint.js';
import { builtinContexts } from '../../src/registry/builtins.js';
import { Registry } from '../../src/registry/registry.js';
import { StaticStore, storedBuiltin } from '../../src/registry/store.js';
import { registryMount } from '../../src/registry/system-tools.js';
import type { ToolContextSpec } from '../../src/registry/types.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { startTarget, type Target } from '../harness/targets.js';

/**
 * Most files and folders a warm `$call` may run code in. A file that joins the walk is a choice
 * docs/architecture.md then names (the three of a request's own inbox and its counted reports
 * joined it: a target cannot aim traffic at the service; and the budget of its replies' bytes in
 * flight: a target cannot fill the service's connection).
 */
const MOST_FILES = 19;
const MOST_FOLDERS = 4;
/** What a call with a verified (cached) grant runs besides: the grant's check, all in src/identity. */
const GRANT_ADDS = ['src/identity/authorize.ts', 'src/identity/cache.ts', 'src/identity/verify.ts'];

const context: ToolContextSpec = {
  key: 'walk',
  title: 'Walk',
  description: 'one tool for the call path',
  matrixTools: [
    {
      name: 'echo',
      description: 'echoes',
      inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
      target: 'app.walk',
      op: '$echo',
    },
  ],
  permissions: { approval: 'never' },
};
const session = { profile: 'default', toolContextRefs: ['walk'] };

/**
 * A getter vitest's module runner adds for each export (`() => { try { return name } catch {} }`):
 * not the project's code, and absent from the built package.
 */
const EXPORT_GETTER = /^\(\) => \{ try \{ return [\w$]+ \} catch \{\} \}$/;

/** The files of `src/` (as `src/x/y.ts`) with a function of their own that ran while `act` ran. */
async function filesRunBy(inspector: Session, act: () => Promise<void>): Promise<string[]> {
  await inspector.post('Profiler.takePreciseCoverage'); // resets the counts
  await act();
  const { result } = await inspector.post('Profiler.takePreciseCoverage');
  const files = new Set<string>();
  for (const script of result) {
    const at = script.url.lastIndexOf('/src/');
    if (at < 0 || script.url.includes('/node_modules/')) continue;
    const ran = script.functions.filter((f) => (f.ranges[0]?.count ?? 0) > 0);
    if (ran.length === 0) continue;
    const { scriptSource } = await inspector.post('Debugger.getScriptSource', { scriptId: script.scriptId });
    const text = (f: (typeof ran)[number]) => scriptSource.slice(f.ranges[0]?.startOffset, f.ranges[0]?.endOffset);
    if (ran.every((f) => EXPORT_GETTER.test(text(f)))) continue;
    files.add(script.url.slice(at + 1).replace(/\.js$/, '.ts'));
  }
  return [...files].sort();
}

/** The folders (`src/bus`, or `src` for a file at the top) of `files`. */
function foldersOf(files: readonly string[]): string[] {
  return [...new Set(files.map((f) => f.slice(0, f.lastIndexOf('/'))))];
}

/** The files docs/architecture.md lists for a `$call`, in the fenced block after "A `$call`". */
function documentedWalk(text: string): string[] {
  const from = text.indexOf('A `$call`');
  if (from < 0) throw new Error('docs/architecture.md no longer tells the walk of a `$call`');
  const block = text.slice(text.indexOf('```', from) + 3, text.indexOf('```', text.indexOf('```', from) + 3));
  return [...block.matchAll(/src\/[\w/.-]+\.ts/g)].map((m) => m[0]);
}

describe('a warm $call', () => {
  let nats: ProcessNats;
  let nc: NatsConnection;
  let inspector: Session;
  let registry: Mount;
  let mount: Mount;
  let grantedMount: Mount;
  let dispatcher: Dispatcher;
  let target: Target;
  const issuer = createAccount();
  let n = 0;

  /** One `$call` on `subject` as a raw NATS request, resolved once its audit batch is on the wire. */
  const call = async (subject: string, grant?: string) => {
    const id = `walk-${n++}`;
    const audited = new Promise<void>((resolve) => {
      const sub = nc.subscribe(CALL_EVENTS, {
        callback: (_err, msg) => {
          if ((decode(msg.data) as Array<{ callId: string }>).some((e) => e.callId === id)) {
            sub.unsubscribe();
            resolve();
          }
        },
      });
    });
    const h = headers();
    if (grant !== undefined) h.set('Matrix-Grant', grant);
    const body = { session, call: { id, name: 'echo', arguments: { q: 'hi' } } };
    const reply = decode((await nc.request(subject, encode(body), { headers: h, timeout: 5_000 })).data);
    expect(reply).toMatchObject({ callId: id, isError: false });
    await audited;
  };

  beforeAll(async () => {
    nats = await startNatsProcess();
    nc = await connectBus({ servers: nats.url });
    const store = new StaticStore(
      [...builtinContexts.map(storedBuiltin), { spec: context, source: 'registered' as const, revision: 1 }],
      1,
    );
    registry = await registryMount(nc, { registry: new Registry(store) }).start();
    target = await startTarget(nc, 'app.walk', { $echo: (args) => ({ echoed: args }) });
    dispatcher = new Dispatcher(nc);
    mount = await dispatcherMount(nc, { dispatcher }).start();
    inspector = new Session();
    inspector.connect();
    await inspector.post('Debugger.enable');
    await inspector.post('Profiler.enable');
    await inspector.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
  });
  afterAll(async () => {
    await inspector?.post('Profiler.stopPreciseCoverage');
    inspector?.disconnect();
    await grantedMount?.stop();
    await mount?.stop();
    dispatcher?.close();
    target?.stop();
    await registry?.stop();
    await nc?.close();
    await nats?.stop();
  });

  it(`runs code in at most ${MOST_FILES} files of ${MOST_FOLDERS} folders, the ones docs/architecture.md lists`, async () => {
    for (let i = 0; i < 5; i++) await call('system.dispatcher.$call');
    const files = await filesRunBy(inspector, () => call('system.dispatcher.$call'));
    expect(files.length, files.join('\n')).toBeLessThanOrEqual(MOST_FILES);
    expect(foldersOf(files).length, foldersOf(files).join('\n')).toBeLessThanOrEqual(MOST_FOLDERS);
    const listed = [...new Set(documentedWalk(readFileSync('docs/architecture.md', 'utf8')))].sort();
    expect(files, 'docs/architecture.md lists the files a warm $call runs code in: list these').toEqual(listed);
  });

  it('with a grant, adds only the grant check of src/identity', async () => {
    const grant = mintGrant(issuer, {
      principal: 'agent:walk',
      session: 'walk-session',
      resolve: session,
      ttlSeconds: 3600,
    });
    const plain = await filesRunBy(inspector, () => call('system.dispatcher.$call'));
    await mount.stop();
    grantedMount = await dispatcherMount(nc, {
      dispatcher,
      identity: IdentityGate.forIssuers([issuer.getPublicKey()]),
    }).start();
    for (let i = 0; i < 5; i++) await call('system.dispatcher.$call', grant);
    const granted = await filesRunBy(inspector, () => call('system.dispatcher.$call', grant));
    expect(granted.filter((f) => !plain.includes(f))).toEqual(GRANT_ADDS);
  });

  it('with an OpenTelemetry SDK registered before its dispatcher is made, adds the span of src/telemetry', async () => {
    const spans = new InMemorySpanExporter();
    trace.setGlobalTracerProvider(
      new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: spans })] }),
    );
    try {
      const observed = new Dispatcher(nc);
      try {
        const call = { id: 'walk-observed', name: 'echo', arguments: { q: 'hi' } };
        for (let i = 0; i < 3; i++) await observed.call(session, call);
        const files = await filesRunBy(inspector, async () => {
          expect(await observed.call(session, call)).toMatchObject({ isError: false });
        });
        expect(files).toEqual(expect.arrayContaining(['src/telemetry/calls.ts', 'src/telemetry/instruments.ts']));
        expect(spans.getFinishedSpans().map((s) => s.name)).toContain('execute_tool echo');
      } finally {
        observed.close();
      }
    } finally {
      trace.disable();
    }
  });
});
