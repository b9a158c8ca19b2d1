import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import type { Service } from '@nats-io/services';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvalsMount } from '../../src/approvals/system-approvals.js';
import { type CheckOutcome, checkConformance } from '../../src/bus/conformance.js';
import type { Mount } from '../../src/bus/mount.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import { agentsMount } from '../../src/reference-mounts/agents.js';
import { packagesMount } from '../../src/reference-mounts/packages.js';
import { sessionsMount } from '../../src/reference-mounts/sessions.js';
import { tracesMount } from '../../src/reference-mounts/traces.js';
import { registryMount } from '../../src/registry/system-tools.js';
import { sharedNatsUrl, testConnection, uniqueMount } from '../harness/bus.js';
import { startJsonMicroMount } from '../harness/micro-mount.js';
import { cli } from '../harness/service.js';

const misses = (outcomes: CheckOutcome[]) => outcomes.filter((o) => !o.ok);

describe('matrix-tools check: conformance of a mount to the bus protocol', () => {
  let nc: NatsConnection;
  let micro: Service;
  const microMount = uniqueMount('demo');
  const mounts: Mount[] = [];
  const stops: Array<() => void> = [];
  const bucket = `test-check-sessions-${process.pid}`;

  beforeAll(async () => {
    nc = await testConnection();
    const traces = tracesMount(nc);
    stops.push(traces.stop);
    mounts.push(
      registryMount(nc),
      dispatcherMount(nc),
      agentsMount(nc),
      traces.mount,
      packagesMount(nc),
      await approvalsMount(nc, { bucket: `test-approvals-check-${process.pid}` }),
    );
    mounts.push(await sessionsMount(nc, { bucket }));
    await Promise.all(mounts.map((m) => m.start()));
    micro = await startJsonMicroMount(nc, microMount);
  });
  afterAll(async () => {
    await micro.stop();
    for (const m of mounts) await m.stop();
    for (const stop of stops) stop();
    await (await new Kvm(nc).open(bucket)).destroy();
  });

  for (const mount of [
    'system.tools',
    'system.dispatcher',
    'system.agents',
    'system.sessions',
    'system.traces',
    'system.packages',
    'system.approvals',
  ]) {
    it(`finds every check holding on the reference mount ${mount}`, async () => {
      const outcomes = await checkConformance(nc, mount);
      expect(misses(outcomes)).toEqual([]);
      expect(outcomes.map((o) => o.check)).toEqual([
        `discovery: $SRV.PING.${mount.replace('.', '-')}`,
        `discovery: $SRV.INFO.${mount.replace('.', '-')}`,
        `discovery: $SRV.STATS.${mount.replace('.', '-')}`,
        '$introspect',
        'discovery: one endpoint per op',
        'MessagePack request',
        'JSON request (Content-Type: application/json)',
        'error model: unknown op',
        'error model: undecodable body',
        'past Matrix-Deadline',
      ]);
    });
  }

  it('says which checks a plain JSON micro service misses, and why', async () => {
    const outcomes = await checkConformance(nc, microMount, { op: 'echo', args: { widget: 1 } });
    const byCheck = Object.fromEntries(outcomes.map((o) => [o.check.replace(/\.[a-z0-9-]+$/, ''), o]));
    // What a micro service gets right: ADR-32 discovery under the mount's service name, and a
    // JSON reply the dispatcher reads (without the Content-Type it should carry).
    expect(outcomes.filter((o) => o.ok).map((o) => o.check)).toEqual([
      `discovery: $SRV.PING.${microMount.replace('.', '-')}`,
      `discovery: $SRV.INFO.${microMount.replace('.', '-')}`,
      `discovery: $SRV.STATS.${microMount.replace('.', '-')}`,
      'JSON request (Content-Type: application/json)',
    ]);
    expect(byCheck['discovery: $SRV.INFO']?.detail).toContain('endpoints echo fail');
    // What it misses, each for the reason a reader of the protocol would give.
    expect(byCheck.$introspect?.detail).toBe(`no responders on ${microMount}.$introspect`);
    expect(byCheck['discovery: one endpoint per op']?.detail).toBe('no $introspect to say what the ops are');
    expect(byCheck['MessagePack request']?.detail).toBe('answered error 400: request body is not JSON');
    expect(byCheck['JSON request (Content-Type: application/json)']?.detail).toMatch(
      `${microMount}.echo answered JSON without the header Content-Type: application/json`,
    );
    expect(byCheck['error model: unknown op']?.detail).toMatch(
      new RegExp(`^no responders on ${microMount.replace('.', '\\.')}\\.\\$noSuchOp`),
    );
    expect(byCheck['error model: undecodable body']?.detail).toBe(
      'body is not {error: {code: "bad_request", message}}',
    );
    expect(byCheck['past Matrix-Deadline']?.detail).toBe('answered without an error (want 504 timeout)');
  });

  it('runs from the CLI: exit 0 when every check holds, 1 on a miss, each check on its own line', async () => {
    const url = sharedNatsUrl();
    const good = await cli(url, 'check', 'system.tools');
    expect(good.code).toBe(0);
    expect(good.stdout).toMatch(
      /^ok\s+\$introspect\s+7 ops: \$introspect \$list \$register \$resolve \$revoke \$search \$unregister$/m,
    );
    expect(good.stdout).toContain('10 of 10 hold');

    const bad = await cli(url, 'check', microMount, '--op', 'echo', '--json');
    expect(bad.code).toBe(1);
    const report = JSON.parse(bad.stdout) as { ok: boolean; outcomes: CheckOutcome[] };
    expect(report.ok).toBe(false);
    expect(report.outcomes.filter((o) => o.ok)).toHaveLength(4);
  }, 60_000); // two CLI processes: 5-7 s each at load 11 on 2 cores

  it('reads a JSON reply without a Content-Type as the dispatcher reads it: a note, not a miss', async () => {
    const outcomes = await checkConformance(nc, microMount, { op: 'echo', args: { widget: 1 } });
    const json = outcomes.find((o) => o.check === 'JSON request (Content-Type: application/json)');
    expect(json).toMatchObject({ ok: true });
    expect(json?.detail).toContain('note, not a miss');
  });

  it('does not ask a mount whose tools are declared encoding json to read MessagePack', async () => {
    const outcomes = await checkConformance(nc, microMount, { op: 'echo', args: {}, encoding: 'json' });
    expect(outcomes.find((o) => o.check === 'MessagePack request')).toEqual({
      check: 'MessagePack request',
      ok: true,
      detail: 'not required: its tools are declared encoding json',
    });
    const cliRun = await cli(sharedNatsUrl(), 'check', microMount, '--op', 'echo', '--encoding', 'json', '--json');
    const report = JSON.parse(cliRun.stdout) as { outcomes: CheckOutcome[] };
    expect(report.outcomes.find((o) => o.check === 'MessagePack request')?.ok).toBe(true);
  });

  it('takes --op with or without its $: echo for $echo, $echo for echo', async () => {
    const tools = await checkConformance(nc, 'system.tools', { op: 'list' });
    expect(misses(tools)).toEqual([]);
    expect(tools.find((o) => o.check === 'MessagePack request')?.detail).toBe(
      'system.tools.$list answered a MessagePack map',
    );
    const micro = await checkConformance(nc, microMount, { op: '$echo', encoding: 'json' });
    expect(micro.find((o) => o.check === 'JSON request (Content-Type: application/json)')?.detail).toMatch(
      `${microMount}.echo answered JSON`,
    );
    const cliRun = await cli(sharedNatsUrl(), 'check', 'system.tools', '--op', 'list');
    expect(cliRun.code).toBe(0);
  });
});
