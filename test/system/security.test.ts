import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeAccount, encodeOperator, encodeUser, fmtCreds } from '@nats-io/jwt';
import { createAccount, createOperator, createUser } from '@nats-io/nkeys';
import { afterAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import { ForbiddenError } from '../../src/bus/errors.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { builtinContexts, MATRIX_INVOKE } from '../../src/registry/builtins.js';
import { Registry } from '../../src/registry/registry.js';
import { StaticStore, storedBuiltin } from '../../src/registry/store.js';
import { registryMount } from '../../src/registry/system-tools.js';
import { sharedNats } from '../harness/bus.js';
import { type DeployedUser, deployments } from '../harness/deployments.js';
import { eventually } from '../harness/eventually.js';
import { prng } from '../harness/fuzz.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { contextSpec } from '../harness/registry.js';
import { cli, type ServiceProcess, startScript } from '../harness/service.js';
import { startTarget } from '../harness/targets.js';

/** The clients' timeout where a refusal is timed: what a request nobody refused would wait, in ms. */
const REFUSAL_TIMEOUT_MS = 10_000;

const dir = mkdtempSync(join(tmpdir(), 'auth-'));
const file = (name: string, content: string | Uint8Array) => {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
};

interface Scenario {
  name: string;
  server: () => Promise<string[]>;
  env: () => Record<string, string>;
  flags: () => string[];
  wrong: () => string[];
}

const seed = (kp: { getSeed(): Uint8Array }) => new TextDecoder().decode(kp.getSeed());
const nkeyUser = createUser();
const stranger = createUser();

const scenarios: Scenario[] = [
  {
    name: 'user and password',
    server: async () => ['--user', 'svc', '--pass', 's3cret'],
    env: () => ({ NATS_USER: 'svc', NATS_PASSWORD: 's3cret' }),
    flags: () => ['--user', 'svc', '--password', 's3cret'],
    wrong: () => ['--user', 'svc', '--password', 'nope'],
  },
  {
    name: 'token',
    server: async () => ['--auth', 'tok-123'],
    env: () => ({ NATS_TOKEN: 'tok-123' }),
    flags: () => ['--token', 'tok-123'],
    wrong: () => ['--token', 'tok-999'],
  },
  {
    name: 'nkey',
    server: async () => [
      '-c',
      file('nkey.conf', `authorization { users = [ { nkey: "${nkeyUser.getPublicKey()}" } ] }\n`),
    ],
    env: () => ({ NATS_NKEY: file('user.nk', seed(nkeyUser)) }),
    flags: () => ['--nkey', join(dir, 'user.nk')],
    wrong: () => ['--nkey', file('stranger.nk', seed(stranger))],
  },
  {
    name: 'creds file (operator JWTs)',
    server: async () => {
      const operator = createOperator();
      const account = createAccount();
      const user = createUser();
      const operatorJwt = await encodeOperator('O', operator);
      const accountJwt = await encodeAccount(
        'A',
        account,
        {
          limits: {
            conn: -1,
            subs: -1,
            payload: -1,
            data: -1,
            imports: -1,
            exports: -1,
            wildcards: true,
            mem_storage: -1,
            disk_storage: -1,
            streams: -1,
            consumer: -1,
          },
        },
        { signer: operator },
      );
      file('user.creds', fmtCreds(await encodeUser('U', user, account), user));
      const otherAccount = createAccount();
      const otherUser = createUser();
      file('stranger.creds', fmtCreds(await encodeUser('X', otherUser, otherAccount), otherUser));
      const system = createAccount();
      const systemJwt = await encodeAccount('SYS', system, {}, { signer: operator });
      const conf = [
        `operator: ${operatorJwt}`,
        `system_account: ${system.getPublicKey()}`,
        'resolver: MEMORY',
        `resolver_preload: { ${account.getPublicKey()}: ${accountJwt}, ${system.getPublicKey()}: ${systemJwt} }`,
      ].join('\n');
      return ['-c', file('op.conf', `${conf}\n`)];
    },
    env: () => ({ NATS_CREDS: join(dir, 'user.creds') }),
    flags: () => ['--creds', join(dir, 'user.creds')],
    wrong: () => ['--creds', join(dir, 'stranger.creds')],
  },
];

describe.each(scenarios)('NATS authentication by $name', (scenario) => {
  let server: ProcessNats;
  let service: ServiceProcess | undefined;
  afterAll(async () => {
    await service?.stop('SIGTERM');
    await server?.stop();
  });

  it('runs the service from the environment and the CLI from flags, and refuses wrong credentials', async () => {
    server = await startNatsProcess(await scenario.server());
    service = await startScript('dist/src/cli/main.js', server.url, ' ready ', scenario.env(), [
      'serve',
      '--no-reference',
    ]);
    const ok = await cli(server.url, 'list', ...scenario.flags());
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain('actor-readonly');
    const refused = await cli(server.url, 'list', ...scenario.wrong());
    expect(refused.code).toBe(3);
    expect(refused.stderr).toMatch(/cannot reach NATS at .*(Authorization Violation|authorization|auth)/i);
    const none = await cli(server.url, 'list');
    expect(none.code).toBe(3);
  }, 30_000);
});

describe.each(deployments)('the least-privilege permissions of $name', (deployment) => {
  let server: ProcessNats;
  let service: ServiceProcess | undefined;
  afterAll(async () => {
    await service?.stop('SIGTERM');
    await server?.stop();
  });
  const connectAs = (user: DeployedUser) => connectBus({ servers: server.url, ...deployment.connect(user) });

  it('lets only the operator register, and keeps agents off the KV bucket and the events', async () => {
    server = await startNatsProcess(deployment.serverArgs());
    service = await startScript('dist/src/cli/main.js', server.url, ' ready ', deployment.env('service'), ['serve']);
    const agentNc = await connectAs('agent');
    const operatorNc = await connectAs('operator');
    const agent = new BusClient(agentNc, { timeoutMs: REFUSAL_TIMEOUT_MS });
    const operator = new BusClient(operatorNc, { timeoutMs: REFUSAL_TIMEOUT_MS });

    expect(
      (await agent.request<{ contexts: string[] }>('system.tools', '$resolve', { profile: 'default' })).contexts,
    ).toEqual(['actor-readonly']);
    const started = performance.now();
    await expect(agent.request('system.tools', '$register', { spec: contextSpec('sneaky') })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    // Refused by the server at once, not at the client's timeout: well within half of it.
    expect(performance.now() - started).toBeLessThan(REFUSAL_TIMEOUT_MS / 2);
    expect(await operator.request('system.tools', '$register', { spec: contextSpec('blessed') })).toMatchObject({
      key: 'blessed',
    });
    await expect(agent.request('system.tools', '$unregister', { key: 'blessed' })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    // Straight to the KV bucket, around $register: refused too.
    await expect(agent.requestRaw('$KV.matrix-tool-contexts.sneaky', { spec: 1 })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    const page = await operator.request<{ contexts: Array<{ key: string }> }>('system.tools', '$list', {});
    expect(page.contexts.map((c) => c.key)).toContain('blessed');
    expect(page.contexts.map((c) => c.key)).not.toContain('sneaky');

    // Forged events: an agent's never arrives; the service's (the control) does.
    const serviceNc = await connectAs('service');
    const heard: string[] = [];
    serviceNc.subscribe('system.tools.events.changed', {
      callback: (_e, msg) => void heard.push(new TextDecoder().decode(msg.data)),
    });
    await serviceNc.flush();
    // The forged one is flushed first, so had NATS let it through it would arrive before the control.
    agentNc.publish('system.tools.events.changed', 'forged');
    await agentNc.flush();
    serviceNc.publish('system.tools.events.changed', 'genuine');
    await serviceNc.flush();
    await eventually(() => heard.includes('genuine'));
    expect(heard).toEqual(['genuine']);
    await serviceNc.close();

    const viaCli = await cli(
      server.url,
      'register',
      file('sneaky.json', JSON.stringify(contextSpec('sneaky-cli'))),
      ...deployment.flags('agent'),
    );
    expect(viaCli.code).toBe(1);
    expect(viaCli.stderr).toContain('error (forbidden): not permitted to publish to system.tools.$register');
    agent.close();
    operator.close();
    await agentNc.close();
    await operatorNc.close();
  }, 30_000);

  it("refuses at the server an agent's message over its payload limit; a normal call works", async () => {
    const agentNc = await connectAs('agent');
    const serviceNc = await connectAs('service');
    try {
      // Each user is told its own limit: the agent's, and for the service (the control) the server's.
      expect(agentNc.info?.max_payload).toBe(deployment.agentMaxPayload);
      expect(serviceNc.info?.max_payload).toBeGreaterThan(deployment.agentMaxPayload);
      const agent = new BusClient(agentNc, { timeoutMs: 3_000 });
      const resolved = await agent.request<{ contexts: string[] }>('system.tools', '$resolve', { profile: 'default' });
      expect(resolved.contexts).toEqual(['actor-readonly']);
      const huge = { profile: 'x'.repeat(deployment.agentMaxPayload) };
      await expect(agent.request('system.tools', '$resolve', huge)).rejects.toThrow(/max_payload/);
      // A client that ignores the limit it was told: the server refuses the message and says so.
      const errors: string[] = [];
      void (async () => {
        for await (const s of agentNc.status()) if (s.type === 'error') errors.push(String(s.error));
      })();
      (agentNc.info as { max_payload: number }).max_payload = 4 * deployment.agentMaxPayload;
      agentNc.publish('system.dispatcher.$call', new Uint8Array(deployment.agentMaxPayload + 1));
      await eventually(() => expect(errors.join('\n')).toMatch(/maximum payload/i));
      // The service's user publishes as much (and more) unrefused.
      serviceNc.publish('system.dispatcher.events.none', new Uint8Array(deployment.agentMaxPayload + 1));
      await serviceNc.flush();
      agent.close();
    } finally {
      await agentNc.close().catch(() => {});
      await serviceNc.close();
    }
  }, 30_000);
});

describe('no unauthorised call ever reaches a target (seeded random calls)', () => {
  it('counts zero at every subject outside the context, reserved or unapproved', async () => {
    const nc = await connectBus(sharedNats());
    const invoke = builtinContexts.flatMap((c) => c.matrixTools ?? []).find((t) => t.name === MATRIX_INVOKE);
    const narrow = {
      key: 'narrow',
      title: 'Narrow',
      description: 'invoke app.allowed only',
      matrixTools: [invoke!],
      permissions: { approval: 'never' as const, allowTargets: ['app.allowed.>'] },
    };
    const registry = await registryMount(nc, {
      registry: new Registry(
        new StaticStore([...builtinContexts.map(storedBuiltin), { spec: narrow, source: 'registered', revision: 1 }]),
      ),
    }).start();
    const ops = ['$run', '$other', '$register', '$unregister', '$write', '$decide', '$call'];
    // The allowed target answers every op: each call that reaches it is one that succeeded.
    const allowed = await startTarget(
      nc,
      'app.allowed',
      Object.fromEntries(ops.map((op) => [op, () => ({ ran: true })])),
    );
    const spies = new Map<string, number>();
    for (const subject of [
      'app.secret.>',
      'system.tools.$register',
      'system.tools.$unregister',
      'system.sessions.$write',
      '$KV.>',
    ]) {
      spies.set(subject, 0);
      nc.subscribe(subject, { callback: () => void spies.set(subject, (spies.get(subject) ?? 0) + 1) });
    }
    let decision = 'approve';
    const approver = await startTarget(nc, 'system.approvals', { $decide: () => ({ decision }) });
    const dispatcher = new Dispatcher(nc, { approvalTimeoutMs: 500, audit: false });
    const r = prng(7);
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)] as T;
    const targets = [
      'app.allowed',
      'app.secret',
      'system.tools',
      'system.approvals',
      'system.dispatcher',
      'system.sessions',
      'app.allowed.deeper',
      'app',
    ];
    let succeeded = 0;
    const round = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const name = pick([MATRIX_INVOKE, MATRIX_INVOKE, MATRIX_INVOKE, 'matrix_introspect', 'run_shell', 'nope']);
        const result = await dispatcher.call(
          { profile: 'p', toolContextRefs: ['narrow'] },
          { id: `r${i}`, name, arguments: { target: pick(targets), op: pick(ops), args: {} } },
        );
        if (!result.isError) succeeded++;
      }
    };
    await round(1_500);
    await nc.flush();
    expect(Object.fromEntries(spies)).toEqual({
      'app.secret.>': 0,
      'system.tools.$register': 0,
      'system.tools.$unregister': 0,
      'system.sessions.$write': 0,
      '$KV.>': 0,
    });
    expect(allowed.count()).toBe(succeeded);
    expect(succeeded).toBeGreaterThan(0);

    decision = 'reject';
    const before = allowed.count();
    await round(500);
    await nc.flush();
    expect(allowed.count()).toBe(before);
    expect(approver.count()).toBeGreaterThan(0);

    dispatcher.close();
    await registry.stop();
    await nc.close();
  }, 60_000);
});
