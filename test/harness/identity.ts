/**
 * A bus set up as `docker compose up` runs it: nats-server with deploy/nats.conf (the service,
 * operator and mounts in account MATRIX, the agents in AGENTS; its mount user copied for the
 * test's mounts `app.spy` and `app.secret`), the service as `service` trusting one
 * grant issuer, an approval policy, and a spy target (as its own user `spy`) behind a registered
 * context. Connections per user, each with the inbox prefix its permissions allow; grants minted
 * on demand.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type NatsConnection, PermissionViolationError } from '@nats-io/nats-core';
import { createAccount, type KeyPair } from '@nats-io/nkeys';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { type GrantSpec, mintGrant } from '../../src/identity/mint.js';
import { type Deployment, staticDeployment } from './deployments.js';
import { type ProcessNats, startNatsProcess } from './nats-server.js';
import { type ServiceProcess, startScript } from './service.js';
import { startTarget, type Target } from './targets.js';

/**
 * How long app.spy's `$slow` takes, in ms: what a call that is stopped early is measured against
 * (20 times the 50 ms after which the tests stop it, so a busy machine never closes the gap).
 */
export const SPY_SLOW_MS = 1_000;

/** The users of deploy/nats.conf (`spy` and `secret` copied from `weather`), with their passwords and inbox prefixes. */
export const users = {
  service: { user: 'service', pass: 'service-secret' },
  operator: { user: 'operator', pass: 'operator-secret', inboxPrefix: '_INBOX_operator' },
  agent: { user: 'agent', pass: 'agent-secret', inboxPrefix: '_INBOX_agent' },
  agent2: { user: 'agent-2', pass: 'agent-2-secret', inboxPrefix: '_INBOX_agent-2' },
  weather: { user: 'weather', pass: 'weather-secret' },
  spy: { user: 'spy', pass: 'spy-secret' },
  secret: { user: 'secret', pass: 'secret-secret' },
} as const;

/**
 * The approval policy the service runs with: `$delete` only for `user:ops-*`; invoke reaches
 * app.spy only; `guarded_wait` (test/system/mcp-2026.test.ts) waits for an approver.
 */
export const policy = {
  rules: [
    { tool: 'guarded_wait', decision: 'ask' },
    { tool: 'matrix_invoke', op: '$delete', principal: 'user:ops-*', decision: 'allow' },
    { tool: 'matrix_invoke', op: '$delete', decision: 'deny', reason: 'deletes are for ops' },
    { tool: 'matrix_invoke', target: 'app.spy', decision: 'allow' },
  ],
  default: 'deny',
};

/** The registered context whose tool targets the spy. */
export const spyContext = {
  key: 'spy-tools',
  title: 'Spy',
  description: 'a tool that reaches app.spy',
  matrixTools: [
    { name: 'spy_run', description: 'runs on app.spy', inputSchema: { type: 'object' }, target: 'app.spy', op: '$run' },
  ],
  permissions: { approval: 'never' },
};

/** The running setup. */
export interface SecuredBus {
  server: ProcessNats;
  service: ServiceProcess;
  issuer: KeyPair;
  /** Receives every request to app.spy.* (what reached a target). */
  spy: Target;
  /** Receives every request to app.secret.* (never allowed: no context, no approval). */
  secret: Target;
  connect(user: keyof typeof users): Promise<NatsConnection>;
  /** A grant from the trusted issuer (or another key), valid for an hour unless told. */
  grant(spec: Partial<GrantSpec> & Pick<GrantSpec, 'resolve'>, issuer?: KeyPair, now?: number): string;
  /** Starts one more instance of the service, as the first was started (it stops with the setup). */
  startInstance(): Promise<ServiceProcess>;
  stop(): Promise<void>;
}

/**
 * Starts the setup on `deployment` (default deploy/nats.conf); `trust: false` runs the service
 * trusting callers, as before grants; `mounts` names more mount users (`<name>` for
 * `app.<name>`, password `<name>-secret`) for the test's own mounts; `conf` is more server
 * configuration (a leafnodes listener, say; deploy/nats.conf only); `natsArgs` go to nats-server
 * besides its configuration; `server` is the nats-server binary (default: the harness's,
 * `natsServerBin()`).
 */
export async function startSecuredBus(
  options: {
    trust?: boolean;
    env?: Record<string, string>;
    mounts?: readonly string[];
    natsArgs?: string[];
    agentMaxPayload?: number;
    conf?: string;
    deployment?: Deployment;
    server?: string;
  } = {},
): Promise<SecuredBus> {
  const deployment = options.deployment ?? staticDeployment;
  const dir = mkdtempSync(join(tmpdir(), 'identity-'));
  const policyFile = join(dir, 'policy.json');
  writeFileSync(policyFile, JSON.stringify(policy));
  const server = await startNatsProcess(
    [
      ...deployment.serverArgs({
        mounts: ['spy', 'secret', ...(options.mounts ?? [])],
        agentMaxPayload: options.agentMaxPayload,
        more: options.conf,
      }),
      ...(options.natsArgs ?? []),
    ],
    { bin: options.server },
  );
  const issuer = createAccount();
  const env: Record<string, string> = deployment.env(users.service.user);
  if (options.trust !== false) env.MATRIX_TRUSTED_ISSUERS = issuer.getPublicKey();
  Object.assign(env, options.env);
  const instance = () =>
    startScript('dist/src/cli/main.js', server.url, ' ready ', env, ['serve', '--policy', policyFile]);
  const service = await instance();
  const instances: ServiceProcess[] = [];
  const opened: NatsConnection[] = [];
  const connect = async (user: keyof typeof users) => {
    const nc = await connectBus({ servers: server.url, ...deployment.connect(users[user].user), name: `test-${user}` });
    opened.push(nc);
    return nc;
  };
  const operator = new BusClient(await connect('operator'), { timeoutMs: 5_000 });
  await operator.request('system.tools', '$register', { spec: spyContext });
  const spy = await startTarget(await connect('spy'), 'app.spy', {
    $run: () => ({ ran: true }),
    $delete: () => ({ deleted: true }),
    $read: () => ({ read: true }),
    // A reply a forger answering at once would beat.
    $slow: () => new Promise((resolve) => setTimeout(() => resolve({ ran: 'slowly' }), SPY_SLOW_MS)),
    // A call that is still running when a test cancels it (or a task, until cancelled).
    $hold: () => new Promise((resolve) => setTimeout(() => resolve({ held: true }), 3_000)),
  });
  const secret = await startTarget(await connect('secret'), 'app.secret', { $run: () => ({ leaked: true }) });
  return {
    server,
    service,
    issuer,
    spy,
    secret,
    connect,
    grant: (spec, by = issuer, now = Date.now()) =>
      mintGrant(by, { principal: 'agent:alpha', session: 'sess-alpha', ttlSeconds: 3600, ...spec }, now),
    startInstance: async () => {
      const another = await instance();
      instances.push(another);
      return another;
    },
    stop: async () => {
      operator.close();
      for (const nc of opened) if (!nc.isClosed()) await nc.close();
      for (const another of instances) await another.stop('SIGTERM');
      await service.stop('SIGTERM');
      await server.stop();
    },
  };
}

/** What the server refuses a connection from now on, as `<operation> <subject>`, as it says so. */
export function refusals(nc: NatsConnection): string[] {
  const refused: string[] = [];
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'error' && s.error instanceof PermissionViolationError)
        refused.push(`${s.error.operation} ${s.error.subject}`);
    }
  })();
  return refused;
}

/** A context whose one tool reaches `<target>.<op>`, called without approval; `more` adds to the tool. */
export function oneToolContext(
  key: string,
  tool: string,
  target: string,
  op: string,
  more: Record<string, unknown> = {},
) {
  return {
    key,
    title: key,
    description: `${tool} on ${target}`,
    matrixTools: [
      { name: tool, description: `runs ${op} on ${target}`, inputSchema: { type: 'object' }, target, op, ...more },
    ],
    permissions: { approval: 'never' },
  };
}

/** The session of the spy's tools (`spyContext`). */
export const spySession = { profile: 'default', toolContextRefs: ['spy-tools'] };

/** `spy_run` through the dispatcher, in `spySession`, with `grant`. */
export function callSpyRun(client: BusClient, grant: string, id = 'c'): Promise<ToolResult> {
  return client.request<ToolResult>(
    'system.dispatcher',
    '$call',
    { session: spySession, call: { id, name: 'spy_run', arguments: {} } },
    { grant },
  );
}
