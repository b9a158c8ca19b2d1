/**
 * `serve` (and `npm start`): connects, mounts the registry, the dispatcher and the reference
 * mounts (each can be turned off), logs one line when ready, drains on SIGINT/SIGTERM.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { type ConnectOptions, connectBus } from '../bus/connect.js';
import { stderrLogger } from '../bus/log.js';
import type { Mount } from '../bus/mount.js';
import { Dispatcher } from '../dispatcher/dispatcher.js';
import { dispatcherMount } from '../dispatcher/mount.js';
import { localToolSource } from '../dispatcher/sessions.js';
import { agentsMount } from '../mounts/agents.js';
import { approvalsMount, loadPolicy, terminalAsker } from '../mounts/approvals.js';
import { AuditStream, auditStreamDefaults } from '../mounts/audit-stream.js';
import { packagesMount } from '../mounts/packages.js';
import { DEFAULT_SESSIONS_BUCKET, sessionsMount } from '../mounts/sessions.js';
import { durableTracesMount } from '../mounts/traces.js';
import { DEFAULT_BUCKET, KvContextStore } from '../registry/kv-store.js';
import { registryMount } from '../registry/mount.js';
import { Presence } from '../registry/presence.js';
import { Registry } from '../registry/registry.js';
import { StaticStore, type ToolContextStore } from '../registry/store.js';
import { startTelemetry } from '../telemetry/sdk.js';

/** What `serve` runs. */
export interface ServeOptions {
  connect: ConnectOptions;
  registry: boolean;
  dispatcher: boolean;
  /** The reference mounts: system.agents, system.sessions, system.traces, system.packages, system.approvals. */
  reference: boolean;
  /** Path of the approval policy file; default: ask at the terminal (deny without one). */
  policy?: string;
  /** KV bucket of registered contexts. */
  bucket: string;
  /** KV bucket of session state. */
  sessionsBucket: string;
  /** Replicas of the buckets when this creates them. */
  replicas: number;
  /** Port of the Prometheus `/metrics` endpoint; none by default. */
  metricsPort?: number;
}

/** Options from the environment, before flags. */
export function serveDefaults(env: NodeJS.ProcessEnv = process.env): Omit<ServeOptions, 'connect'> {
  const defaults: Omit<ServeOptions, 'connect'> = {
    registry: true,
    dispatcher: true,
    reference: true,
    bucket: env.MATRIX_TOOLS_BUCKET || DEFAULT_BUCKET,
    sessionsBucket: env.MATRIX_SESSIONS_BUCKET || DEFAULT_SESSIONS_BUCKET,
    replicas: Number(env.MATRIX_TOOLS_REPLICAS) || 1,
  };
  if (env.MATRIX_APPROVAL_POLICY) defaults.policy = env.MATRIX_APPROVAL_POLICY;
  return defaults;
}

/** Runs until SIGINT/SIGTERM; exits the process. */
export async function serve(options: ServeOptions): Promise<void> {
  if (!options.registry && !options.dispatcher && !options.reference) {
    process.stderr.write('nothing to run: every mount is turned off\n');
    process.exit(2);
  }
  const policy = options.policy === undefined ? undefined : loadPolicy(options.policy);
  // Before any mount: spans and metrics from the first call on (nothing when neither is asked for).
  const telemetry = await startTelemetry({ metricsPort: options.metricsPort }).catch((err: Error) => {
    process.stderr.write(`${err.message}\n`);
    process.exit(2);
  });
  let nc: NatsConnection;
  try {
    nc = await connectBus({ ...options.connect, name: options.connect.name ?? 'matrix-tool-registry' });
  } catch (err) {
    process.stderr.write(
      `cannot reach NATS at ${options.connect.servers} (${(err as Error).message}). ` +
        'Start one with `docker compose up -d nats`, or run a local `nats-server -js`, or set NATS_URL.\n',
    );
    process.exit(1);
  }

  const mounts: Mount[] = [];
  const cleanups: Array<() => void> = [];
  const registry = options.registry ? new Registry(await openStore(nc, options), new Presence(nc)) : undefined;
  if (registry !== undefined) mounts.push(registryMount(nc, { registry, logger: stderrLogger }));
  let dispatcher: Dispatcher | undefined;
  if (options.dispatcher) {
    // Beside the registry, resolve in this process: same state, one hop less.
    dispatcher = new Dispatcher(nc, registry !== undefined ? { source: localToolSource(registry) } : {});
    mounts.push(dispatcherMount(nc, { dispatcher, logger: stderrLogger }));
  }
  if (options.dispatcher && !options.reference) {
    // The audit stream stores calls from the first one on, whether or not system.traces runs here.
    await AuditStream.open(nc, auditStreamDefaults()).catch((err: Error) => stderrLogger.error(`audit events not stored: ${err.message}`));
  }
  if (options.reference) {
    const traces = await durableTracesMount(nc, { ...auditStreamDefaults(), logger: stderrLogger });
    cleanups.push(traces.stop);
    mounts.push(agentsMount(nc), traces.mount, packagesMount(nc), approvalsMount(nc, { policy, asker: terminalAsker() }));
    try {
      mounts.push(await sessionsMount(nc, { bucket: options.sessionsBucket }));
    } catch (err) {
      stderrLogger.error(`system.sessions not mounted: ${(err as Error).message}`);
    }
  }
  for (const m of mounts) m.logger = stderrLogger;
  await Promise.all(mounts.map((m) => m.start()));
  stderrLogger.info(`${mounts.map((m) => m.name).join(', ')} ready on ${nc.getServer()}${telemetry ? `; telemetry: ${telemetry.description}` : ''}`);

  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    stderrLogger.info(`${signal}: draining`);
    await Promise.all(mounts.map((m) => m.stop()));
    for (const c of cleanups) c();
    dispatcher?.close();
    await nc.drain();
    await telemetry?.shutdown();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect' || s.type === 'reconnect') stderrLogger.info(`nats ${s.type}`, { server: s.server });
    }
  })();
}

/** The KV store when JetStream answers; else the built-ins alone, said in one line. */
async function openStore(nc: NatsConnection, options: ServeOptions): Promise<ToolContextStore> {
  try {
    return await KvContextStore.open(nc, { bucket: options.bucket, replicas: options.replicas, logger: stderrLogger });
  } catch (err) {
    stderrLogger.error(`serving the built-in contexts only, registration off: ${(err as Error).message}`);
    return new StaticStore();
  }
}
