/**
 * Every change to a hosted server's definitions is an event of the durable audit trail, with the
 * digests before and after (PROTOCOL 12): the fixture server rug-pulls (a changed description, a
 * new tool, a removed one), an operator accepts, and `system.traces.$query` reads each change
 * back from the stream. On a nats-server of its own: the trail's subject is one per server.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallEvent } from '../../src/audit/events.js';
import type { TraceQueryReply } from '../../src/audit/query.js';
import { connectBus } from '../../src/bus/connect.js';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { durableTracesMount } from '../../src/reference-mounts/traces.js';
import { eventually } from '../harness/eventually.js';
import { fixtureServer, type HostWorld, startHostWorld } from '../harness/mcp-host.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';

/** What `$introspect` of the host mount says of held changes. */
interface Held {
  held: Array<{ tool: string; change: string; before?: string; after: string }>;
}

describe('definition changes in the audit trail', () => {
  let nats: ProcessNats;
  let nc: NatsConnection;
  let world: HostWorld;
  let traces: { mount: Mount; stop(): void };
  /** A second dispatcher instance: each change is stored by one of the two. */
  let second: Dispatcher;

  beforeAll(async () => {
    nats = await startNatsProcess();
    nc = await connectBus({ servers: nats.url, name: 'mcp-host-audit' });
    traces = await durableTracesMount(nc, { stream: 'DEFINITIONS_TEST' });
    await traces.mount.start();
    world = await startHostWorld(
      { fx: fixtureServer() },
      { timing: { initializeTimeoutMs: 15_000, firstBackoffMs: 200, maxBackoffMs: 1_000 } },
      { nc, audit: true },
    );
    second = new Dispatcher(nc);
  }, 60_000);
  afterAll(async () => {
    second?.close();
    await world?.stop();
    traces?.stop();
    await traces?.mount.stop();
    await nc?.drain();
    await nats?.stop();
  });

  const definitions = async (query: Record<string, unknown> = {}): Promise<CallEvent[]> => {
    const reply = await world.client.request<TraceQueryReply>('system.traces', '$query', query);
    return (reply.events as CallEvent[]).filter((e) => e.definition !== undefined);
  };
  const said = (events: CallEvent[]) => events.map((e) => `${e.name} ${e.definition?.change}`).sort();

  it('stores a held change, a removal and an accept, each with its digests', async () => {
    expect(await definitions()).toEqual([]);
    await world.call(['mcp.fx'], 'fx_rug_pull', {});
    const { held } = await eventually(async () => {
      const info = await world.client.request<Held>('mcp.fx', '$introspect', {});
      expect(info.held).toHaveLength(2);
      return info;
    });
    const greet = held.find((h) => h.tool === 'greet');
    const newcomer = held.find((h) => h.tool === 'newcomer');
    const stored = await eventually(async () => {
      const events = await definitions();
      expect(said(events)).toEqual(['fx_greet held', 'fx_newcomer held', 'fx_spew removed']);
      return events;
    });
    const of = (name: string) => stored.find((e) => e.name === name);
    expect(of('fx_greet')).toMatchObject({
      target: 'mcp.fx',
      outcome: 'ok',
      definition: { server: 'fx', tool: 'greet', change: 'held', before: greet?.before, after: greet?.after },
    });
    expect(greet?.before).toMatch(/^[0-9a-f]{64}$/);
    expect(greet?.before).not.toBe(greet?.after);
    expect(of('fx_newcomer')?.definition).toEqual({
      server: 'fx',
      tool: 'newcomer',
      change: 'held',
      after: newcomer?.after,
    });
    const spew = of('fx_spew')?.definition;
    expect(spew).toMatchObject({ server: 'fx', tool: 'spew', change: 'removed' });
    expect(spew?.before).toMatch(/^[0-9a-f]{64}$/);
    expect(spew?.after).toBeUndefined();

    await world.client.request('mcp.fx', '$accept', { tools: ['greet'] }, { principal: 'user:ops' });
    const accepted = await eventually(async () => {
      const events = (await definitions({ tool: 'fx_greet' })).filter((e) => e.definition?.change === 'accepted');
      expect(events).toHaveLength(1);
      return events[0];
    });
    expect(accepted).toMatchObject({
      name: 'fx_greet',
      principal: 'user:ops',
      definition: { change: 'accepted', before: greet?.before, after: greet?.after },
    });
    // Stored once, though two dispatcher instances listen.
    expect(said(await definitions())).toEqual([
      'fx_greet accepted',
      'fx_greet held',
      'fx_newcomer held',
      'fx_spew removed',
    ]);
  }, 60_000);
});
