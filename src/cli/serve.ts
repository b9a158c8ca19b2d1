/**
 * `serve` (and `npm start`): connects, mounts the registry, the dispatcher and the reference
 * mounts (each can be turned off), logs one line when ready; the command drains on SIGINT/SIGTERM.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import type { Command } from 'commander';
import { terminalAsker } from '../approvals/asker.js';
import { type ApprovalPolicyFile, describePolicy, loadPolicy } from '../approvals/policy.js';
import { approvalsMount } from '../approvals/system-approvals.js';
import type { RefusalBudgetOptions } from '../audit/refusals.js';
import { DEFAULT_SHARE_DIVISOR, type TrailShareOptions, trailShareOf } from '../audit/share.js';
import { AuditStream, type AuditStreamOptions } from '../audit/stream.js';
import { type ConnectOptions, connectBus } from '../bus/connect.js';
import { type Logger, stderrLogger } from '../bus/log.js';
import type { Mount } from '../bus/mount.js';
import { Mounts, mountReplyPrefix } from '../bus/subjects.js';
import { Dispatcher } from '../dispatcher/dispatcher.js';
import { localToolSource } from '../dispatcher/session-cache.js';
import { dispatcherMount } from '../dispatcher/system-dispatcher.js';
import { IdentityGate, type IdentityGateOptions, parseIssuers } from '../identity/gate.js';
import { loadClaimsMapping } from '../identity/oidc/mapping.js';
import { OidcTrust } from '../identity/oidc/trust.js';
import { RevocationStore, Revocations } from '../identity/revocations.js';
import { DEFAULT_GRANT_MAX_TTL_SECONDS } from '../identity/verify.js';
import type { ServerConfig } from '../mcp/host/config.js';
import { agentsMount } from '../reference-mounts/agents.js';
import { packagesMount } from '../reference-mounts/packages.js';
import { sessionsMount } from '../reference-mounts/sessions.js';
import { durableTracesMount } from '../reference-mounts/traces.js';
import { KvContextStore } from '../registry/kv-store.js';
import { Presence } from '../registry/presence.js';
import { Registry } from '../registry/registry.js';
import { StaticStore, type ToolContextStore } from '../registry/store.js';
import { registryMount } from '../registry/system-tools.js';
import { TaskRunner } from '../tasks/runner.js';
import { TaskStore } from '../tasks/store.js';
import { tasksMount } from '../tasks/system-tasks.js';
import { startTelemetry } from '../telemetry/sdk.js';
import { addSettings, connectionSource, type Flags, serveConfig, serveSettings, withConnection } from './config.js';
import { ExitCode, type Output, processOutput, reportError, UsageError } from './output.js';
import { interrupted } from './run.js';

/** What `serve` runs. */
export interface ServeOptions {
  /** Where and how to connect. */
  connect: ConnectOptions;
  /** Mount system.tools. */
  registry: boolean;
  /** Mount system.dispatcher. */
  dispatcher: boolean;
  /** The reference mounts: system.agents, system.sessions, system.traces, system.packages, system.approvals. */
  reference: boolean;
  /** Path of the approval policy file; default: ask at the terminal (deny without one). */
  policy?: string;
  /** Path of an `mcpServers` file whose servers are hosted as mounts `mcp.<name>` (`MATRIX_MCP_SERVERS`). */
  mcpServers?: string;
  /** KV bucket of registered contexts. */
  bucket: string;
  /** KV bucket of session state. */
  sessionsBucket: string;
  /** KV bucket of pending approvals (`MATRIX_APPROVALS_BUCKET`). */
  approvalsBucket: string;
  /** Replicas of the buckets when this creates them. */
  replicas: number;
  /** Trusted grant issuers, public nkeys (`MATRIX_TRUSTED_ISSUERS`, `--trust`); none = trusting callers. */
  trust?: string;
  /**
   * Trusted OpenID Connect issuers (`--trust-oidc`), the audience their tokens must name and the
   * claims mapping file: their access tokens are grants too (PROTOCOL 14).
   */
  oidc?: { issuers: string[]; audience: string; mapping: string };
  /** The audience a grant must name (`MATRIX_GRANT_AUDIENCE`); none by default. */
  grantAudience?: string;
  /**
   * Serve grants bound by `nats.user` on a nats-server without the fixes for CVE-2026-33223 and
   * CVE-2026-33246 (`--allow-unsafe-nats`, `MATRIX_ALLOW_UNSAFE_NATS`); default false: refused there.
   */
  allowUnsafeNats?: boolean;
  /** Longest a grant may live, in seconds (`MATRIX_GRANT_MAX_TTL`); default 24 h. */
  grantMaxTtlSeconds?: number;
  /** Where audit events are stored, and for how long. */
  audit: AuditStreamOptions;
  /**
   * How many `$call`s refused without a valid grant are stored one by one
   * (`MATRIX_AUDIT_REFUSALS`, `MATRIX_AUDIT_REFUSAL_BURST`).
   */
  refusals?: RefusalBudgetOptions;
  /**
   * Each principal's share of the audit trail: 1/`auditShare` of its bytes per `max_age`, in
   * bursts of 1/256 of it (`MATRIX_AUDIT_SHARE`); default 16; 0: no share (everything in the trail).
   */
  auditShare?: number;
  /** Port of the Prometheus `/metrics` endpoint; none by default. */
  metricsPort?: number;
  /** Address of the metrics endpoint; default 127.0.0.1. */
  metricsHost?: string;
  /** Bearer token of the metrics endpoint (`MATRIX_METRICS_TOKEN`); none by default. */
  metricsToken?: string;
  /** OTLP/HTTP endpoint for spans and metrics (`OTEL_EXPORTER_OTLP_ENDPOINT`); none by default. */
  otlpEndpoint?: string;
}

/** A running `serve`: what it mounted, and how to stop it. */
export interface ServeHandle {
  /** The mounts it runs, by name. */
  readonly mounts: readonly string[];
  /** The connection it runs on. */
  readonly connection: NatsConnection;
  /** Stops every mount, closes what they opened, drains the connection. Once; later calls wait for the first. */
  stop(reason?: string): Promise<void>;
}

/** Connects, mounts what `options` turn on, and resolves once every mount answers. Never exits the process. */
export async function serve(options: ServeOptions, logger: Logger = stderrLogger): Promise<ServeHandle> {
  if (!options.registry && !options.dispatcher && !options.reference)
    throw new UsageError('nothing to run: every mount is turned off');
  const policy = options.policy === undefined ? undefined : loadPolicy(options.policy);
  const mcpServers = options.mcpServers === undefined ? undefined : await readMcpServers(options.mcpServers);
  const revocations = new Revocations();
  const oidc = options.oidc === undefined ? undefined : oidcTrust(options.oidc);
  const identity = identityGate(options.trust, {
    audience: options.grantAudience,
    maxTtlSeconds: options.grantMaxTtlSeconds,
    revocations,
    oidc,
    allowUnsafeNats: options.allowUnsafeNats,
  });
  for (const failure of (await oidc?.start()) ?? [])
    logger.error(`${failure}; its keys are fetched again on its first token`);
  // Before any mount: spans and metrics from the first call on (nothing when neither is asked for).
  const telemetry = await startTelemetry({
    metricsPort: options.metricsPort,
    metricsHost: options.metricsHost,
    metricsToken: options.metricsToken,
    otlpEndpoint: options.otlpEndpoint,
  }).catch((err: Error) => {
    throw new UsageError(err.message);
  });
  let nc: NatsConnection | undefined;
  let targets: NatsConnection | undefined;
  let running: Running;
  try {
    nc = await connectOrExplain(options.connect);
    if (options.dispatcher) targets = await connectTargets(nc, options.connect);
    running = await startMounts(nc, targets, options, { policy, identity, revocations }, logger);
    if (mcpServers !== undefined) {
      const { startMcpHost } = await import('../mcp/host/host.js');
      const host = await startMcpHost(nc, { servers: mcpServers, logger, replicas: options.replicas });
      running.hosted.push(...host.servers.map((s) => `${s.mountName} (${s.state})`));
      running.beforeStop.push(() => host.stop());
    }
  } catch (err) {
    await nc?.close();
    await targets?.close();
    await telemetry?.shutdown();
    oidc?.stop();
    throw err;
  }
  const names = [...running.mounts.map((m) => m.name), ...running.hosted];
  const identityWarning = identity.warning();
  if (identityWarning !== undefined) logger.info(identityWarning);
  const telemetryNote = telemetry ? `; telemetry: ${telemetry.description}` : '';
  // The policy only where this instance decides: another instance may serve system.approvals.
  const policyNote = names.includes(Mounts.Approvals) ? `${describePolicy(options.policy, policy)}; ` : '';
  logger.info(
    `${names.join(', ')} ready on ${nc.getServer()}; ${policyNote}${identity.describe()}; ${identity.describeServer(nc.info?.version)}${telemetryNote}`,
  );
  void logConnectionChanges(nc, identity, logger);
  let stopped: Promise<void> | undefined;
  const shutdown = async (reason: string) => {
    logger.info(`${reason}: draining`);
    // Calls waiting for a person stop waiting first (their approvals stay pending), or the drain waits for them.
    for (const stop of running.stopping) stop();
    await Promise.all(running.beforeStop.map((stop) => stop()));
    await Promise.all(running.mounts.map((m) => m.stop()));
    for (const close of running.closers) close();
    await connection.drain();
    if (targets !== undefined && !targets.isClosed()) await targets.drain();
    await telemetry?.shutdown();
    oidc?.stop();
  };
  const connection = nc;
  return { mounts: names, connection, stop: (reason = 'stop') => (stopped ??= shutdown(reason)) };
}

/**
 * The gate for the trusted issuers `trust` names: grants from them, or trusting callers when it
 * is not set. A setting that names no valid issuer is a usage error (a typo must not turn trust off).
 */
export function identityGate(trust: string | undefined, options: IdentityGateOptions = {}): IdentityGate {
  const issuers = parseIssuers(trust);
  try {
    if (trust !== undefined && trust.trim() !== '' && issuers.length === 0)
      throw new Error(`'${trust}' names no issuer`);
    if (options.oidc !== undefined) return IdentityGate.forGrants(issuers, options);
    return IdentityGate.forIssuers(issuers, options);
  } catch (err) {
    throw new UsageError(`--trust / MATRIX_TRUSTED_ISSUERS: ${(err as Error).message}`);
  }
}

/** The OIDC issuers to trust, with the claims mapping read from its file (a usage error naming what is wrong). */
function oidcTrust(settings: NonNullable<ServeOptions['oidc']>): OidcTrust {
  try {
    return new OidcTrust({
      issuers: settings.issuers,
      audience: settings.audience,
      mapping: loadClaimsMapping(settings.mapping),
    });
  } catch (err) {
    throw new UsageError(`--trust-oidc: ${(err as Error).message}`);
  }
}

/** Connects, or fails with one line that says how to get a NATS server. */
async function connectOrExplain(connect: ConnectOptions): Promise<NatsConnection> {
  try {
    return await connectBus({ ...connect, name: connect.name ?? 'matrix-tool-registry' });
  } catch (err) {
    throw new Error(
      `cannot reach NATS at ${connectionSource(connect)}: ${(err as Error).message}. ` +
        'Start one with `docker compose up -d nats`, or run a local `nats-server -js`, or set NATS_URL.',
    );
  }
}

/**
 * The dispatcher's connection for its calls to targets: the same user, replies on
 * `mountReplyPrefix` (what mounts' users may answer onto). A target that floods it costs this
 * connection (its socket, its buffer at the server, a slow-consumer cut), not the one the
 * registry, KV, tasks and approvals answer on.
 */
function connectTargets(nc: NatsConnection, connect: ConnectOptions): Promise<NatsConnection> {
  const name = `${connect.name ?? 'matrix-tool-registry'}-targets`;
  return connectBus({ ...connect, name, inboxPrefix: mountReplyPrefix(nc) });
}

/** The started mounts, and what else to close when they stop. */
interface Running {
  mounts: Mount[];
  closers: Array<() => void>;
  /** Run before the mounts drain. */
  stopping: Array<() => void>;
  /** Stopped before the mounts drain: the MCP host (its servers end, its mounts drain). */
  beforeStop: Array<() => Promise<void>>;
  /** The MCP mounts hosted here, with their state, for the ready line. */
  hosted: string[];
}

/** What the mounts are given beside the options: the approval policy and who may call as whom. */
interface Gates {
  policy: ApprovalPolicyFile | undefined;
  identity: IdentityGate;
  /** The revocations the identity gate consults, kept in step with the bucket here. */
  revocations: Revocations;
}

/** Builds the mounts `options` turn on and starts them. */
async function startMounts(
  nc: NatsConnection,
  targets: NatsConnection | undefined,
  options: ServeOptions,
  { policy, identity, revocations }: Gates,
  logger: Logger,
): Promise<Running> {
  const running: Running = { mounts: [], closers: [], stopping: [], beforeStop: [], hosted: [] };
  const revocationStore = await watchRevocations(nc, options, identity, revocations, running, logger);
  const registry = options.registry ? new Registry(await openStore(nc, options, logger), new Presence(nc)) : undefined;
  if (registry !== undefined)
    running.mounts.push(registryMount(nc, { registry, logger, identity, revocations: revocationStore }));
  if (options.dispatcher) {
    // Beside the registry, resolve in this process: same state, one hop less.
    const dispatcher = new Dispatcher(nc, {
      ...(registry !== undefined && { source: localToolSource(registry) }),
      refusals: options.refusals,
      approvalsBucket: options.approvalsBucket,
      trailShare: trailShareOfAudit(options),
      identity,
      targetsConnection: targets,
    });
    const tasks = await startTasks(nc, dispatcher, options.replicas, { identity, revocations }, logger);
    running.stopping.push(() => {
      dispatcher.stopWaiting();
      tasks?.stopWaiting();
    });
    running.closers.push(() => {
      tasks?.close();
      dispatcher.close();
    });
    running.mounts.push(dispatcherMount(nc, { dispatcher, logger, identity, tasks }));
    if (tasks !== undefined) running.mounts.push(tasksMount(nc, { runner: tasks, identity, logger }));
  }
  if (options.dispatcher && !options.reference) {
    // The audit stream stores calls from the first one on, whether or not system.traces runs here.
    await AuditStream.open(nc, options.audit).catch((err: Error) =>
      logger.error(`audit events not stored: ${err.message}`),
    );
  }
  if (options.reference)
    await addReferenceMounts(nc, running, { policy, identity, revocations }, options, logger, registry);
  for (const m of running.mounts) m.logger = logger;
  await Promise.all(running.mounts.map((m) => m.start()));
  return running;
}

/**
 * With trusted issuers: the revocations bucket (its `max_age` the longest grant lifetime),
 * watched into `revocations` until the mounts stop; undefined when trusting callers, or (said
 * in the log) without JetStream.
 */
async function watchRevocations(
  nc: NatsConnection,
  options: ServeOptions,
  identity: IdentityGate,
  revocations: Revocations,
  running: Running,
  logger: Logger,
): Promise<RevocationStore | undefined> {
  if (identity.trusting) return undefined;
  const maxAgeMs = (options.grantMaxTtlSeconds ?? DEFAULT_GRANT_MAX_TTL_SECONDS) * 1000;
  try {
    const store = await RevocationStore.open(nc, { maxAgeMs, replicas: options.replicas });
    const watch = store.watch(revocations, (err) => logger.error(`revocations: ${(err as Error).message}`));
    running.closers.push(() => watch.stop());
    // Not ready before the revocations stored while this instance was down are known.
    await watch.caughtUp;
    return store;
  } catch (err) {
    logger.error(`grant revocations unavailable (no $revoke): ${(err as Error).message}`);
    return undefined;
  }
}

/**
 * The task runner on KV `matrix-tasks`, or undefined (tasks off, said once) when JetStream does
 * not answer. It checks each task's grant again before sending it, and hears revocations.
 */
async function startTasks(
  nc: NatsConnection,
  dispatcher: Dispatcher,
  replicas: number,
  { identity, revocations }: Pick<Gates, 'identity' | 'revocations'>,
  logger: Logger,
): Promise<TaskRunner | undefined> {
  try {
    const store = await TaskStore.open(nc, { replicas });
    return new TaskRunner(dispatcher, store, { logger, identity, revocations }).start();
  } catch (err) {
    logger.error(`tasks off: ${(err as Error).message}`);
    return undefined;
  }
}

/** system.agents, .traces, .packages, .approvals, and .sessions when JetStream answers. */
async function addReferenceMounts(
  nc: NatsConnection,
  running: Running,
  { policy, identity }: Gates,
  options: ServeOptions,
  logger: Logger,
  registry: Registry | undefined,
) {
  const traces = await durableTracesMount(nc, { ...options.audit, logger });
  running.closers.push(traces.stop);
  // system.agents asks the registered tools' targets by name: only their own users answer there.
  const agents = agentsMount(nc, registry === undefined ? {} : { targets: () => registry.targets() });
  running.mounts.push(agents, traces.mount, packagesMount(nc));
  try {
    const approvals = { bucket: options.approvalsBucket, replicas: options.replicas, identity, logger };
    running.mounts.push(await approvalsMount(nc, { ...approvals, policy, asker: terminalAsker() }));
  } catch (err) {
    logger.error(`system.approvals not mounted (gated calls are refused): ${(err as Error).message}`);
  }
  try {
    running.mounts.push(await sessionsMount(nc, { bucket: options.sessionsBucket }));
  } catch (err) {
    logger.error(`system.sessions not mounted: ${(err as Error).message}`);
  }
}

/** The servers of an `mcpServers` file; a file that cannot be used is a usage error. */
async function readMcpServers(path: string): Promise<ServerConfig[]> {
  const { loadServersFile } = await import('../mcp/host/config.js');
  try {
    return loadServersFile(path);
  } catch (err) {
    throw new UsageError(`--mcp-servers / MATRIX_MCP_SERVERS: ${(err as Error).message}`);
  }
}

/**
 * Logs disconnects and reconnects until the connection closes. A reconnect may reach another
 * server of a cluster, of another version: its line says what that one guarantees (each request
 * is checked against the server it came through; this is what an operator reads).
 */
async function logConnectionChanges(nc: NatsConnection, identity: IdentityGate, logger: Logger): Promise<void> {
  for await (const s of nc.status()) {
    if (s.type === 'disconnect') logger.info('nats disconnect', { server: s.server });
    if (s.type === 'reconnect')
      logger.info(`nats reconnect; ${identity.describeServer(nc.info?.version)}`, { server: s.server });
  }
}

/** `serve`: runs until SIGINT/SIGTERM, then stops; resolves with the exit code (1 when it cannot start). */
export async function runServe(
  flags: Flags,
  out: Output,
  env: NodeJS.ProcessEnv = process.env,
  until: Promise<string> = interrupted(),
): Promise<number> {
  let handle: ServeHandle;
  try {
    handle = await serve(serveConfig(flags, env));
  } catch (err) {
    const code = reportError(err, out);
    return code === ExitCode.Usage ? code : ExitCode.Failed;
  }
  await handle.stop(await until);
  return ExitCode.Ok;
}

/** Declares `serve`. */
export function addServeCommand(program: Command): void {
  const cmd = program
    .command('serve')
    .description('run system.tools, system.dispatcher and the reference mounts (what npm start runs)');
  addSettings(withConnection(cmd), serveSettings).action(async (flags: Flags) => {
    process.exitCode = await runServe(flags, processOutput);
  });
}

/** The KV store when JetStream answers; else the built-ins alone, said in one line. */
async function openStore(nc: NatsConnection, options: ServeOptions, logger: Logger): Promise<ToolContextStore> {
  try {
    return await KvContextStore.open(nc, { bucket: options.bucket, replicas: options.replicas, logger });
  } catch (err) {
    logger.error(`serving the built-in contexts only, registration off: ${(err as Error).message}`);
    return new StaticStore();
  }
}

/** Each principal's share of the trail the options describe; undefined when `auditShare` is 0. */
function trailShareOfAudit(options: ServeOptions): TrailShareOptions | undefined {
  const divisor = options.auditShare ?? DEFAULT_SHARE_DIVISOR;
  if (divisor === 0) return undefined;
  return trailShareOf(options.audit.maxBytes ?? 2 ** 30, options.audit.maxAgeMs ?? 7 * 86_400_000, divisor);
}
