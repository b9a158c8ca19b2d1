import { encode } from '@msgpack/msgpack';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import type { ResolvedToolContext } from '../../src/registry/types.js';
import { deployments } from '../harness/deployments.js';
import { eventually } from '../harness/eventually.js';
import { oneToolContext, refusals, type SecuredBus, startSecuredBus } from '../harness/identity.js';
import { cli, startScript } from '../harness/service.js';

describe.each(deployments)('mounts under $name: one NATS user per mount, replies on _INBOX_targets', (deployment) => {
  let bus: SecuredBus;
  let agent: BusClient;
  let operator: BusClient;

  beforeAll(async () => {
    bus = await startSecuredBus({ deployment });
    agent = new BusClient(await bus.connect('agent'), { timeoutMs: 10_000 });
    operator = new BusClient(await bus.connect('operator'), { timeoutMs: 5_000 });
    await operator.request('system.tools', '$register', {
      spec: oneToolContext('spy-slow', 'spy_slow', 'app.spy', '$slow', { timeoutMs: 5_000 }),
    });
  });
  afterAll(async () => {
    agent?.close();
    operator?.close();
    await bus?.stop();
  });

  /** A tool call as the agent, under a grant for exactly `refs`. */
  const call = (refs: string[], name: string, args: Record<string, unknown>) => {
    const session = { profile: 'default', toolContextRefs: refs };
    const grant = bus.grant({ resolve: session });
    return agent.request<ToolResult>(
      'system.dispatcher',
      '$call',
      { session, call: { id: `c-${name}`, name, arguments: args } },
      { grant },
    );
  };

  it('gives a mount user none of the requests of a mount nested under its name, however wide it subscribes', async () => {
    // nats-server takes `SUB app.secret.>` where only app.secret.* is allowed (a `>` passes the
    // allow list's `*`); the deny list keeps app.secret.<x>.… from being delivered to it.
    const attackerNc = await bus.connect('secret');
    const heard: string[] = [];
    for (const subject of ['app.secret.>', 'app.secret.*.*'])
      attackerNc.subscribe(subject, {
        callback: (err, msg) => {
          if (err === null) heard.push(msg.subject);
        },
      });
    await attackerNc.flush();
    const serviceNc = await bus.connect('service');
    for (const subject of ['app.secret.alerts.$get', 'app.secret.alerts.deep.$op', 'app.secret.$own'])
      serviceNc.publish(subject, new Uint8Array());
    await serviceNc.flush();
    await eventually(() => expect(heard).toContain('app.secret.$own'));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(heard.filter((s) => s !== 'app.secret.$own')).toEqual([]);
    await attackerNc.close();
    await serviceNc.close();
  });

  it("gives a mount's user none of another mount's requests, so its forged reply never wins", async () => {
    // app.secret's user, turned against app.spy: it answers at once, the spy after 300 ms.
    const attackerNc = await bus.connect('secret');
    const refused = refusals(attackerNc);
    const heard: string[] = [];
    const forge = (err: Error | null, msg: { subject: string; respond(data: Uint8Array): boolean }) => {
      if (err !== null) return;
      heard.push(msg.subject);
      msg.respond(encode({ ran: 'forged' }));
    };
    for (const subject of ['app.spy.*', 'app.spy.$slow', 'app.>']) attackerNc.subscribe(subject, { callback: forge });
    attackerNc.subscribe('app.spy.*', { queue: 'app-spy', callback: forge });
    await attackerNc.flush();
    const before = bus.spy.count('$slow');

    const result = await call(['spy-slow'], 'spy_slow', {});
    expect(result).toMatchObject({ isError: false });
    expect(result.content).toContain('slowly');
    expect(result.content).not.toContain('forged');
    expect(bus.spy.count('$slow')).toBe(before + 1);
    expect(heard).toEqual([]);
    await eventually(() =>
      expect(refused.sort()).toEqual([
        'subscription app.>',
        'subscription app.spy.$slow',
        'subscription app.spy.*',
        'subscription app.spy.*',
      ]),
    );
    await attackerNc.close();
  });

  it("lets a mount answer onto _INBOX_targets and _INBOX_operator only, never onto the service's _INBOX (its JetStream replies)", async () => {
    // What a service's JetStream client listens on: the reply subject of its API requests.
    const serviceNc = await bus.connect('service');
    const apiRequests: string[] = [];
    serviceNc.subscribe('$JS.API.>', {
      callback: (err, msg) => void (err === null && msg.reply && apiRequests.push(msg.reply)),
    });
    // Everything that reaches an inbox, as the server routes it.
    const arrived: Array<{ subject: string; body: string }> = [];
    for (const inboxes of ['_INBOX.>', '_INBOX_targets.>', '_INBOX_operator.>']) {
      serviceNc.subscribe(inboxes, {
        callback: (err, msg) => void (err === null && arrived.push({ subject: msg.subject, body: msg.string() })),
      });
    }
    await serviceNc.flush();
    const jsNc = await bus.connect('service');
    await (await jetstreamManager(jsNc)).getAccountInfo();
    const jsInbox = await eventually(() => apiRequests.find((r) => r.startsWith('_INBOX.')) ?? false);

    // app.spy's user, which gets the service's requests to app.spy and so sees their reply subjects.
    const mountNc = await bus.connect('spy');
    const refused = refusals(mountNc);
    const replySubjects: string[] = [];
    mountNc.subscribe('app.spy.*', {
      callback: (err, msg) => void (err === null && msg.reply && replySubjects.push(msg.reply)),
    });
    await mountNc.flush();
    expect(await call(['spy-tools'], 'spy_run', {})).toMatchObject({ isError: false });
    const [dispatcherReply] = await eventually(() => replySubjects.length > 0 && replySubjects);
    // Its learned root aimed at the service's own inboxes: the JetStream client's, and _INBOX under the dispatcher's.
    const aims = [
      jsInbox,
      `${jsInbox.slice(0, jsInbox.lastIndexOf('.'))}.forged`,
      `_INBOX.${String(dispatcherReply).split('.').slice(1).join('.')}`,
    ];
    for (const subject of aims) mountNc.publish(subject, 'forged');
    const allowed = ['_INBOX_targets.allowed.x', '_INBOX_operator.allowed.x'];
    for (const subject of allowed) mountNc.publish(subject, 'answer');
    await mountNc.flush();
    // The control, sent after them: once it arrives, whatever the server let through has too.
    serviceNc.publish(jsInbox, 'genuine');
    await eventually(() => arrived.some((a) => a.body === 'genuine'));

    expect(arrived.filter((a) => a.body === 'forged')).toEqual([]);
    expect(arrived.filter((a) => a.body === 'answer').map((a) => a.subject)).toEqual(allowed);
    expect(dispatcherReply).toMatch(/^_INBOX_targets\./);
    await eventually(() => expect(refused).toEqual(aims.map((s) => `publish ${s}`)));
    for (const nc of [mountNc, serviceNc, jsNc]) await nc.close();
  });

  it('serves a mount run as its own user end to end: the weather example through the dispatcher, presence and system.agents', async () => {
    const weather = await startScript(
      'dist/examples/weather-service.js',
      bus.server.url,
      'weather service ready',
      deployment.env('weather'),
    );
    try {
      // Its user may not register: the operator does.
      expect(weather.output()).toContain('not permitted to register the context weather');
      const inputSchema = {
        type: 'object',
        required: ['city'],
        properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1, maximum: 7 } },
      };
      const spec = oneToolContext('weather-tools', 'weather_forecast', 'app.weather', '$forecast', {
        timeoutMs: 5_000,
        inputSchema,
        resultMode: 'text',
      });
      await operator.request('system.tools', '$register', { spec });

      const result = await call(['weather-tools'], 'weather_forecast', { city: 'Lisbon', days: 2 });
      expect(result).toMatchObject({ isError: false, content: 'Lisbon, day 1: sunny\nLisbon, day 2: cloudy' });
      // Presence ($SRV.PING, answered onto _INBOX_targets) keeps the tool among the available ones.
      const session = { profile: 'default', toolContextRefs: ['weather-tools'] };
      const live = await agent.request<ResolvedToolContext>(
        'system.tools',
        '$resolve',
        { ...session, onlyAvailable: true },
        { grant: bus.grant({ resolve: session }) },
      );
      expect(live.matrixTools.map((t) => t.name)).toContain('weather_forecast');
      // system.agents: discovery ($SRV.INFO) and the mount's own $introspect, both from the weather user.
      const described = await call(['actor-readonly'], 'matrix_introspect', { mount: 'app.weather' });
      expect(described).toMatchObject({ isError: false });
      expect(described.content).toContain('"$forecast"');
      expect(described.content).toContain('"maxLength":100');
      // The CLI as service, with no inbox prefix of its own: `introspect` and `check` of the mount.
      const asService = deployment.flags('service');
      const introspected = await cli(bus.server.url, 'introspect', 'app.weather', '--json', ...asService);
      expect(introspected.stderr).toBe('');
      expect(JSON.parse(introspected.stdout)).toMatchObject({
        mount: 'app.weather',
        ops: expect.arrayContaining([expect.objectContaining({ op: '$forecast' })]),
      });
      const checked = await cli(bus.server.url, 'check', 'app.weather', ...asService);
      expect(checked.stdout).not.toMatch(/no answer|nobody answered/);
      expect(checked.code).toBe(0);
    } finally {
      expect(await weather.stop('SIGTERM')).toBe(0);
    }
  }, 30_000);
});
