/**
 * A flood of `$call`s without a valid grant does not erase the audit trail. Any agent user may
 * publish to `system.dispatcher.$call`, and the trail is bounded by bytes, oldest dropped first:
 * stored as full events, 1 GiB of refusals in a few minutes would push everyone else's events
 * out. Refusals no valid grant stands behind are stored up to a rate and counted past it into
 * summary events; calls with a valid grant are stored whatever the flood. A principal's calls
 * refused before they are sent (a tool not in its session, a session that does not resolve)
 * cost it nothing either, and are held to a budget of its own.
 */
import { headers, type NatsConnection } from '@nats-io/nats-core';
import { createAccount } from '@nats-io/nkeys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallEvent } from '../../src/audit/events.js';
import { AuditStream } from '../../src/audit/stream.js';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import { Header } from '../../src/bus/headers.js';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { localToolSource } from '../../src/dispatcher/session-cache.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import { IdentityGate } from '../../src/identity/gate.js';
import { mintGrant } from '../../src/identity/mint.js';
import { Registry } from '../../src/registry/registry.js';
import { StaticStore } from '../../src/registry/store.js';
import type { ResolveRequest } from '../../src/registry/types.js';
import { eventually } from '../harness/eventually.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';

const FLOOD = 5_000;
/** One call with a valid grant every this many refusals: 63 of them, 21 of each kind. */
const EVERY = 80;
const GRANTED = Math.ceil(FLOOD / EVERY);
const PER_SECOND = 10;
const BURST = 100;

describe('a flood of $calls without a valid grant', () => {
  let server: ProcessNats;
  let nc: NatsConnection;
  let client: BusClient;
  let dispatcher: Dispatcher;
  let mount: Mount;
  let trail: AuditStream;
  const issuer = createAccount();
  const grant = (spec: { principal?: string; now?: number; by?: typeof issuer; resolve?: ResolveRequest } = {}) =>
    mintGrant(
      spec.by ?? issuer,
      {
        principal: spec.principal ?? 'agent:alpha',
        session: 'sess-alpha',
        resolve: spec.resolve ?? { profile: 'default' },
        ttlSeconds: 3600,
      },
      spec.now,
    );

  beforeAll(async () => {
    server = await startNatsProcess();
    nc = await connectBus({ servers: server.url, name: 'refusal-flood' });
    client = new BusClient(nc, { timeoutMs: 60_000 });
    trail = await AuditStream.open(nc, { stream: 'FLOOD_AUDIT' });
    dispatcher = new Dispatcher(nc, {
      source: localToolSource(new Registry(new StaticStore())),
      refusals: { perMinute: PER_SECOND * 60, burst: BURST, summaryMs: 500 },
    });
    mount = await dispatcherMount(nc, {
      dispatcher,
      identity: IdentityGate.forIssuers([issuer.getPublicKey()]),
    }).start();
  });
  afterAll(async () => {
    await mount?.stop();
    dispatcher?.close();
    client?.close();
    await nc?.drain();
    await server?.stop();
  });

  /** Every event the stream stores now, in order. */
  async function stored(): Promise<CallEvent[]> {
    const { first, last } = await trail.bounds();
    const events: CallEvent[] = [];
    for (let seq = first; seq <= last && last > 0; seq++) {
      const batch = await trail.batch(seq);
      for (const e of batch?.events ?? []) if (e !== undefined) events.push(e);
    }
    return events;
  }

  it('stores at most its rate of them and tells the rest in summaries, while every granted call is stored', async () => {
    const expired = grant({ principal: 'agent:old', now: Date.now() - 7_200_000 });
    const stranger = grant({ by: createAccount() });
    const valid = grant();
    const garbage = new TextEncoder().encode('not a request at all');
    // Four kinds of refusal: no grant, an untrusted issuer's, an expired one, and a body the mount cannot read (and no grant).
    const refuse = (i: number): Promise<unknown> => {
      const call = { id: `flood-${i}`, name: `tool_${i % 7}` };
      const kind = i % 4;
      if (kind === 3) return nc.request('system.dispatcher.$call', garbage, { timeout: 60_000 });
      const ctx = kind === 0 ? {} : { grant: kind === 1 ? stranger : expired };
      return client.request('system.dispatcher', '$call', { session: { profile: 'default' }, call }, ctx);
    };
    // Calls with a valid grant meanwhile: one that runs, one whose body asks for other authority, one with a body the mount cannot read.
    const granted = (i: number): Promise<unknown> => {
      const kind = i % 3;
      if (kind === 2) {
        const h = headers();
        h.set(Header.Grant, valid);
        return nc.request('system.dispatcher.$call', garbage, { timeout: 60_000, headers: h });
      }
      const session = kind === 0 ? { profile: 'default' } : { profile: 'admin' };
      return client.request(
        'system.dispatcher',
        '$call',
        { session, call: { id: `granted-${i}`, name: 'no_such_tool' } },
        { grant: valid },
      );
    };

    const started = performance.now();
    const pending: Promise<unknown>[] = [];
    for (let i = 0; i < FLOOD; i++) {
      pending.push(refuse(i).catch(() => undefined));
      if (i % EVERY === 0) pending.push(granted(i / EVERY).catch(() => undefined));
      if (i % 250 === 249) await Promise.all(pending.splice(0));
    }
    await Promise.all(pending);
    const seconds = (performance.now() - started) / 1000;

    // Every refusal is told: stored one by one, or counted in a summary (summaries go out within 500 ms).
    const told = (events: CallEvent[]) => {
      const one = events.filter((e) => e.principal === undefined && e.refused === undefined).length;
      const summarised = events.reduce((n, e) => n + (e.refused?.count ?? 0), 0);
      return { one, summarised };
    };
    const events = await eventually(
      async () => {
        const now = await stored();
        const { one, summarised } = told(now);
        return one + summarised === FLOOD && now.filter((e) => e.principal !== undefined).length === GRANTED
          ? now
          : false;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    ).catch(async () => stored());

    const { one, summarised } = told(events);
    const summaries = events.filter((e) => e.refused !== undefined);
    console.log(
      `${FLOOD} refusals in ${seconds.toFixed(1)} s: ${one} stored, ${summarised} in ${summaries.length} summaries`,
    );
    // At most the burst and the rate over the flood's length (a second of slack), never one per refusal.
    expect(one).toBeLessThanOrEqual(BURST + PER_SECOND * (Math.ceil(seconds) + 1));
    expect(one + summarised).toBe(FLOOD);
    expect(summaries.length).toBeGreaterThan(0);
    for (const s of summaries) {
      expect(s).toMatchObject({ name: '(refusals)', outcome: 'error' });
      expect(Object.values(s.refused?.reasons ?? {}).reduce((a, b) => a + b, 0)).toBe(s.refused?.count);
    }
    const reasons = new Set(summaries.flatMap((s) => Object.keys(s.refused?.reasons ?? {})));
    // A body nobody can read, sent without a grant, is refused for the grant: its body is never read.
    expect([...reasons].sort()).toEqual(['expired', 'missing', 'untrusted_issuer']);

    // Every call with a valid grant is stored, under its principal and session.
    const ofGrant = events.filter((e) => e.principal !== undefined);
    expect(ofGrant).toHaveLength(GRANTED);
    expect(ofGrant.every((e) => e.principal === 'agent:alpha' && e.session === 'sess-alpha')).toBe(true);
    expect(ofGrant.filter((e) => e.grantFailure === 'authority_mismatch')).toHaveLength(GRANTED / 3);
    expect(ofGrant.filter((e) => e.code === 'bad_request')).toHaveLength(GRANTED / 3);

    // A stored refusal of an expired grant says whom its issuer named, apart from the principal.
    const expiredEvent = events.find((e) => e.grantFailure === 'expired' && e.refused === undefined);
    expect(expiredEvent).toMatchObject({ code: 'forbidden', grantSubject: 'agent:old' });
    expect(expiredEvent?.principal).toBeUndefined();
  }, 120_000);

  it("holds one principal's cheap refusals to its own budget, so its flood pushes out nobody's events, and cuts what it named", async () => {
    const flooder = grant({ principal: 'agent:flood' });
    const victim = grant({ principal: 'agent:victim' });
    const before = (await stored()).length;
    // 2,000 calls of a tool no session has, each named and numbered with 256 astral characters
    // (a 2.2 KB event each, stored one by one before), and one call of the victim's meanwhile.
    const astral = '\u{1D54F}'.repeat(256);
    const calls: Promise<unknown>[] = [];
    for (let i = 0; i < 2_000; i++) {
      calls.push(
        client
          .request(
            'system.dispatcher',
            '$call',
            { session: { profile: 'default' }, call: { id: astral, name: astral } },
            { grant: flooder },
          )
          .catch(() => 0),
      );
      if (i === 1_000)
        calls.push(
          client.request(
            'system.dispatcher',
            '$call',
            { session: { profile: 'default' }, call: { id: 'v-1', name: 'no_such_tool' } },
            { grant: victim },
          ),
        );
      if (i % 250 === 249) await Promise.all(calls.splice(0));
    }
    await Promise.all(calls);
    const fresh = await eventually(
      async () => {
        const now = (await stored()).slice(before);
        const mine = now.filter((e) => e.principal === 'agent:flood');
        const told =
          mine.filter((e) => e.refused === undefined).length + mine.reduce((n, e) => n + (e.refused?.count ?? 0), 0);
        return told === 2_000 ? now : false;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    const mine = fresh.filter((e) => e.principal === 'agent:flood');
    const one = mine.filter((e) => e.refused === undefined);
    // Its own budget (the burst, and the rate over a few seconds) one by one; the rest counted under its name.
    expect(one.length).toBeGreaterThanOrEqual(BURST);
    expect(one.length).toBeLessThan(BURST + PER_SECOND * 30);
    expect(
      mine
        .filter((e) => e.refused !== undefined)
        .every((e) => e.name === '(refusals)' && e.refused?.reasons.not_found !== undefined),
    ).toBe(true);
    // What it named is cut to 64 characters: ~300 bytes an event, not 2.2 KB.
    expect(one.every((e) => e.name.length <= 64 && e.callId.length <= 64 && e.name.endsWith('…'))).toBe(true);
    // The victim's call is stored, its own budget untouched by the flood.
    expect(fresh.filter((e) => e.principal === 'agent:victim' && e.callId === 'v-1')).toHaveLength(1);
  }, 120_000);

  it("holds a principal's calls whose session does not resolve to its own budget, not one stored event a call", async () => {
    // The grant names a tool context no registry holds: each call's $resolve fails, and nothing is sent.
    const resolve = { profile: 'default', toolContextRefs: ['no-such-context'] };
    const lost = grant({ principal: 'agent:lost', resolve });
    const CALLS = 600;
    const before = (await stored()).length;
    const started = performance.now();
    const calls: Promise<unknown>[] = [];
    for (let i = 0; i < CALLS; i++) {
      calls.push(
        client
          .request(
            'system.dispatcher',
            '$call',
            { session: resolve, call: { id: `lost-${i}`, name: 'x' } },
            { grant: lost },
          )
          .catch(() => 0),
      );
      if (i % 200 === 199) await Promise.all(calls.splice(0));
    }
    await Promise.all(calls);
    const seconds = (performance.now() - started) / 1000;
    const mine = (events: CallEvent[]) => events.filter((e) => e.principal === 'agent:lost');
    const told = (events: CallEvent[]) =>
      events.filter((e) => e.refused === undefined).length + events.reduce((n, e) => n + (e.refused?.count ?? 0), 0);
    const fresh = await eventually(
      async () => {
        const now = mine((await stored()).slice(before));
        return told(now) === CALLS ? now : false;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    ).catch(async () => mine((await stored()).slice(before)));
    const one = fresh.filter((e) => e.refused === undefined);
    console.log(`${CALLS} calls of a session that does not resolve in ${seconds.toFixed(1)} s: ${one.length} stored`);
    // Its budget's burst and rate over the calls' length (a second of slack), never one per call.
    expect(one.length).toBeLessThanOrEqual(BURST + PER_SECOND * (Math.ceil(seconds) + 1));
    expect(told(fresh)).toBe(CALLS);
    expect(one.every((e) => e.code === 'not_found' && e.session === 'sess-alpha')).toBe(true);
    expect(
      fresh
        .filter((e) => e.refused !== undefined)
        .every((e) => e.name === '(refusals)' && e.refused?.reasons.not_found !== undefined),
    ).toBe(true);
  }, 120_000);
});
