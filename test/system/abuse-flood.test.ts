/**
 * Requests that cost the service nothing: under deploy/nats.conf (its agents' payload limit
 * raised to the server's 1 MB, so the service itself must refuse), with the service trusting one
 * grant issuer, an agent user floods `system.dispatcher.$call`, `system.tools.$resolve` and
 * `$list` with bodies built to be expensive (60,000 unknown keys, MessagePack 900,000 levels
 * deep, JSON `[` × 450,000, and with a valid grant tool arguments of 40,000 unknown keys), and
 * `$call` with a grant of its own each time, as long as a grant may be and signed by no one (no
 * cache of refused grants holds one; each costs its decode and an ed25519 check). Each
 * is refused at a small, bounded cost, and another agent's calls keep their pace meanwhile:
 * the victim's median stays within 10× its idle figure. Registry, dispatcher and reference
 * mounts share one event loop, so every millisecond one refusal costs is a millisecond every
 * other caller waits.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { headers, type NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { encodeBody } from '../../src/bus/codec.js';
import { Header, MAX_GRANT_LENGTH } from '../../src/bus/headers.js';
import { GRANT_SHAPE } from '../../src/identity/jwt.js';
import { badGrants } from '../harness/bad-grants.js';
import { tracked } from '../harness/children.js';
import { eventually } from '../harness/eventually.js';
import { type SecuredBus, startSecuredBus, users } from '../harness/identity.js';

const flooderScript = fileURLToPath(new URL('../harness/flooder.mjs', import.meta.url));
/** Grants as long as the header takes, of objects as wide as a grant's may be. */
const badGrantShape = { chars: MAX_GRANT_LENGTH, entries: GRANT_SHAPE.maxMapEntries };

/** A tool whose schema names its one field: any other key is a violation. */
const strictContext = {
  key: 'strict-tools',
  title: 'Strict',
  description: 'a tool with a closed input schema',
  matrixTools: [
    {
      name: 'strict_run',
      description: 'runs on app.spy with one named argument',
      inputSchema: { type: 'object', properties: { city: { type: 'string' } }, additionalProperties: false },
      target: 'app.spy',
      op: '$run',
    },
  ],
  permissions: { approval: 'never' },
};
const session = { profile: 'default', toolContextRefs: ['spy-tools', 'strict-tools'] };

/** An object of `n` keys nobody asked for, each 13 characters: 60,000 of them make ~0.9 MB of MessagePack. */
function unknownKeys(n: number, into: Record<string, unknown> = {}): Record<string, unknown> {
  for (let i = 0; i < n; i++) into[`u${String(i).padStart(12, '0')}`] = 1;
  return into;
}

/** MessagePack arrays of one item nested `levels` deep (0x91 …, then nil). */
function deepMsgPack(levels: number): Uint8Array {
  const bytes = new Uint8Array(levels + 1).fill(0x91);
  bytes[levels] = 0xc0;
  return bytes;
}

interface Flood {
  name: string;
  subject: string;
  body: Uint8Array;
  json?: boolean;
  /** Sent with the attacker's own valid grant. */
  granted?: boolean;
  /** Each request with a grant of its own of the longest length taken, signed by no one. */
  badGrants?: boolean;
  /** Requests a second each lane sends at most; default 5. */
  perSecond?: number;
}

/** The CPU (user and system) process `pid` has spent, in ms, from /proc (10 ms ticks). */
function cpuMsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  // After "pid (comm) ": state is field 3, utime 14 and stime 15 (1-based), in clock ticks of 10 ms.
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

describe('requests built to be expensive, from an agent user', () => {
  let bus: SecuredBus;
  let victim: BusClient;
  let attacker: NatsConnection;
  let victimGrant: string;
  let attackerGrant: string;
  let idleP50: number;
  let badGrant: () => string;

  const floods: Flood[] = [
    {
      name: '$call of 60,000 unknown keys',
      subject: 'system.dispatcher.$call',
      body: encodeBody(unknownKeys(60_000, { session: { profile: 'default' }, call: { id: 'c', name: 'x' } })),
    },
    {
      name: '$resolve of 60,000 unknown keys',
      subject: 'system.tools.$resolve',
      body: encodeBody(unknownKeys(60_000, { profile: 'default' })),
    },
    { name: '$list of 60,000 unknown keys', subject: 'system.tools.$list', body: encodeBody(unknownKeys(60_000)) },
    { name: '$call of MessagePack 900,000 deep', subject: 'system.dispatcher.$call', body: deepMsgPack(900_000) },
    {
      name: '$call of JSON [ × 450,000',
      subject: 'system.dispatcher.$call',
      body: new TextEncoder().encode('['.repeat(450_000)),
      json: true,
    },
    {
      name: 'granted $call with arguments of 40,000 unknown keys',
      subject: 'system.dispatcher.$call',
      body: encodeBody({ session, call: { id: 'c', name: 'strict_run', arguments: unknownKeys(40_000) } }),
      granted: true,
    },
    // 1000/s a lane is as fast as the service answers: ~800-2,000 refusals a second on 2 shared cores.
    ...[5, 50, 1000].map((perSecond) => ({
      name: `$call with a grant of its own each, ${MAX_GRANT_LENGTH} characters signed by no one, at ${perSecond}/s a lane`,
      subject: 'system.dispatcher.$call',
      body: encodeBody({ session, call: { id: 'c', name: 'spy_run', arguments: {} } }),
      badGrants: true,
      perSecond,
    })),
  ];

  /** One request of a flood, its refusal awaited (whatever it is). */
  function send(flood: Flood): Promise<unknown> {
    const h = headers();
    if (flood.json) h.set(Header.ContentType, 'application/json');
    if (flood.granted) h.set(Header.Grant, attackerGrant);
    if (flood.badGrants) h.set(Header.Grant, badGrant());
    return attacker.request(flood.subject, flood.body, { timeout: 60_000, headers: h }).catch(() => undefined);
  }

  /** The flood as another agent process sends it: eight lanes at 5 a second each until stopped; `stop()` says how many it sent. */
  async function startFlooder(flood: Flood): Promise<{ stop(): Promise<number> }> {
    const bodyFile = join(mkdtempSync(join(tmpdir(), 'flood-')), 'body');
    writeFileSync(bodyFile, flood.body);
    const h: Record<string, string> = {};
    if (flood.json) h[Header.ContentType] = 'application/json';
    if (flood.granted) h[Header.Grant] = attackerGrant;
    const { user, pass, inboxPrefix } = users.agent2;
    const spec = {
      servers: bus.server.url,
      user,
      pass,
      inboxPrefix,
      subject: flood.subject,
      bodyFile,
      headers: h,
      lanes: 8,
      perSecond: flood.perSecond ?? 5,
      badGrants: flood.badGrants ? { iss: bus.issuer.getPublicKey(), ...badGrantShape } : undefined,
    };
    const child = tracked(
      spawn(process.execPath, [flooderScript, JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'inherit'] }),
    );
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    await eventually(() => expect(out).toContain('flooding'), { timeoutMs: 10_000 });
    return {
      stop: async () => {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
        return Number(/sent (\d+)/.exec(out)?.[1] ?? 0);
      },
    };
  }

  /** Milliseconds of one victim call (a granted spy_run that reaches its target). */
  async function victimCall(): Promise<number> {
    const started = performance.now();
    const result = await victim.request<{ isError?: boolean }>(
      'system.dispatcher',
      '$call',
      { session, call: { id: 'v', name: 'spy_run', arguments: {} } },
      { grant: victimGrant },
    );
    expect(result.isError).not.toBe(true);
    return performance.now() - started;
  }

  beforeAll(async () => {
    // The service's own defence, measured without the agents' payload limit of deploy/nats.conf
    // (which refuses the largest of these bodies at the server: security.test.ts).
    bus = await startSecuredBus({ agentMaxPayload: 1_048_576 });
    const operator = new BusClient(await bus.connect('operator'), { timeoutMs: 10_000 });
    await operator.request('system.tools', '$register', { spec: strictContext });
    victimGrant = bus.grant({ principal: 'agent:victim', session: 'sess-victim', resolve: session });
    attackerGrant = bus.grant({ principal: 'agent:flood', session: 'sess-flood', resolve: session });
    victim = new BusClient(await bus.connect('agent'), { timeoutMs: 60_000 });
    attacker = await bus.connect('agent2');
    badGrant = badGrants(bus.issuer.getPublicKey(), badGrantShape.chars, badGrantShape.entries);
    for (let i = 0; i < 20; i++) await victimCall();
    const idle: number[] = [];
    for (let i = 0; i < 60; i++) idle.push(await victimCall());
    idleP50 = median(idle);
    console.log(`victim idle p50 ${idleP50.toFixed(2)} ms`);
  }, 60_000);

  afterAll(async () => {
    victim?.close();
    await bus?.stop();
  });

  for (const flood of floods) {
    it(`refuses ${flood.name} at a bounded cost, and another agent's calls keep their pace`, async () => {
      // What one refusal costs, idle: the round trip of the attacker's request, and the service's
      // CPU for it (which a busy machine does not stretch as it stretches the round trip).
      const costs: number[] = [];
      const cpuBefore = cpuMsOf(bus.service.child.pid as number);
      for (let n = 0; n < 5; n++) {
        const started = performance.now();
        await send(flood);
        costs.push(performance.now() - started);
      }
      const cost = median(costs);
      const cpuEach = (cpuMsOf(bus.service.child.pid as number) - cpuBefore) / 5;
      // The victim's pace now, without the flood: the control of the pace under it.
      const control: number[] = [];
      for (let i = 0; i < 30; i++) control.push(await victimCall());
      const controlP50 = median(control);
      // Eight lanes from another process, each sending the body again once refused, 5 a second at most, while the victim calls.
      const flooder = await startFlooder(flood);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const underFlood: number[] = [];
      const until = performance.now() + 3_000;
      while (performance.now() < until || underFlood.length < 5) underFlood.push(await victimCall());
      const sent = await flooder.stop();
      // The flood ran (each lane waits for its refusal: ~80 in 3.3 s where each cost ~1 s, ~135 where they cost nothing).
      expect(sent).toBeGreaterThan(60);
      const p50 = median(underFlood);
      console.log(
        `${flood.name} (${flood.body.length} bytes): refusal ${cost.toFixed(1)} ms (service CPU ${cpuEach.toFixed(0)} ms); victim p50 ${p50.toFixed(2)} ms under 8 lanes at ${flood.perSecond ?? 5}/s, ${controlP50.toFixed(2)} ms just before (${underFlood.length} calls in 3 s, ${sent} refusals)`,
      );
      // A refusal costs the service a fraction of decoding the body (0.4-1.2 s of CPU for these
      // bodies; /proc counts in 10 ms ticks), and the victim waits at most 10× its pace just
      // before the flood (or idle, at the start, when that was slower), never less than 25 ms.
      expect(cpuEach, flood.name).toBeLessThan(60);
      expect(p50, flood.name).toBeLessThan(Math.max(10 * Math.max(controlP50, idleP50), 25));
    }, 60_000);
  }
});
