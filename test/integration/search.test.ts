/**
 * `system.tools.$search` over the wire, under grants (PROTOCOL 13): a search finds only what its
 * session's grant reaches, however much better other tools match; a `$register` is searchable at
 * once; bad input is `bad_request` and the mount goes on. The search tool of a deferred session
 * runs through the dispatcher like any tool, with the session and its grant passed along.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusClient } from '../../src/bus/client.js';
import { contracts, SchemaId } from '../../src/bus/contracts.js';
import { BadRequestError, ForbiddenError } from '../../src/bus/errors.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { mintGrant } from '../../src/identity/mint.js';
import type { ResolveRequest, SearchReply } from '../../src/registry/types.js';
import type { Instance } from '../harness/registry.js';
import { searchContext as context, type SearchBus, startSearchBus } from '../harness/search.js';

const granted = context('crm', [
  ['contact_lookup', 'Find a customer contact by email address'],
  ['invoice_send', 'Send an invoice to a customer'],
  ['note_add', 'Add a note to a customer record'],
]);
// Tools the grant does not cover, written to match the queries below better than any granted one.
const hidden = context('payroll', [
  ['salary_export', 'Export every employee salary to a spreadsheet: salary export of salaries'],
  ['customer_contact_email_lookup', 'Find customer contact email address lookup customer contact email'],
]);

const authority = { profile: 'agent', toolContextRefs: ['crm'] };

describe('system.tools.$search under grants', () => {
  let bus: SearchBus;
  let client: BusClient;
  let instance: Instance;
  let grant: string;
  const search = (body: object, ctx: { grant?: string } = { grant }) =>
    client.request<SearchReply>('system.tools', '$search', body, ctx);

  beforeAll(async () => {
    bus = await startSearchBus([granted, hidden]);
    ({ client, instance } = bus);
    grant = mintGrant(bus.issuer, { principal: 'agent:ada', session: 's-ada', resolve: authority, ttlSeconds: 600 });
  });
  afterAll(() => bus.stop());

  it('never shows a tool outside the grant, and counts only the reachable ones', async () => {
    for (const query of ['customer contact email lookup', 'export salary spreadsheet', 'salary']) {
      const reply = await search({ session: authority, query, limit: 50 });
      expect(contracts().check(SchemaId.SearchReply)(reply)).toBeUndefined();
      const text = JSON.stringify(reply);
      expect(text).not.toMatch(/salary|payroll|customer_contact_email_lookup/);
      expect(reply.tools.every((t) => t.context === 'crm')).toBe(true);
      expect(reply.total).toBe(reply.tools.length);
    }
    const found = await search({ session: authority, query: 'customer contact email lookup' });
    expect(found.tools[0]?.name).toBe('contact_lookup');
    // Every granted tool speaks of a customer: all three match, no hidden one counted.
    expect((await search({ session: authority, query: 'customer' })).total).toBe(3);
    // Without refs in the body the grant's own authority is the session.
    expect((await search({ session: { profile: 'agent' }, query: 'salary' })).total).toBe(0);
  });

  it('refuses a body asking for what its grant does not give, and a search without a grant', async () => {
    await expect(
      search({ session: { profile: 'agent', toolContextRefs: ['payroll'] }, query: 'salary' }),
    ).rejects.toMatchObject({ code: 'forbidden', details: { grant: 'authority_mismatch' } });
    await expect(search({ session: authority, query: 'salary' }, {})).rejects.toThrow(ForbiddenError);
  });

  it('finds a tool registered a moment ago, and forgets one removed', async () => {
    const before = await search({ session: authority, query: 'refund payment' });
    expect(before.tools.map((t) => t.name)).not.toContain('payment_refund');
    const more = context('crm', [...granted.matrixTools!.map((t): [string, string] => [t.name, t.description])]);
    more.matrixTools!.push({ ...more.matrixTools![0]!, name: 'payment_refund', description: 'Refund a payment' });
    const { revision } = await instance.registry.register({ spec: more, expectedRevision: 1 });
    await expect.poll(() => instance.store.revision).toBeGreaterThanOrEqual(revision);
    expect((await search({ session: authority, query: 'refund payment' })).tools[0]?.name).toBe('payment_refund');
    await instance.registry.register({ spec: granted, expectedRevision: revision });
    await expect.poll(async () => (await search({ session: authority, query: 'refund' })).total).toBe(0);
  });

  it('answers the same for the same state, ties in name order', async () => {
    const a = await search({ session: authority, query: 'customer', limit: 3 });
    const b = await search({ session: authority, query: 'customer', limit: 3 });
    expect(b).toEqual(a);
    const scores = a.tools.map((t) => t.score);
    expect([...scores].sort((x, y) => y - x)).toEqual(scores);
  });

  it.each([
    [{ session: authority, query: '' }, '/query'],
    [{ session: authority, query: 'x', limit: 0 }, '/limit'],
    [{ session: authority, query: 'x', limit: 51 }, '/limit'],
    [{ query: 'x' }, ''],
  ])('refuses %j as bad_request and goes on serving', async (body, path) => {
    const err = await search(body).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BadRequestError);
    expect(JSON.stringify((err as BadRequestError).details)).toContain(path);
    expect((await search({ session: authority, query: 'invoice' })).tools[0]?.name).toBe('invoice_send');
  });

  it('runs a deferred session’s tool_search through the dispatcher, within the grant', async () => {
    const session: ResolveRequest = { ...authority, format: 'anthropic', defer: { threshold: 1, keep: ['note_add'] } };
    const resolved = await client.request<{ providerTools: Array<Record<string, unknown>> }>(
      'system.tools',
      '$resolve',
      session,
      { grant },
    );
    expect(resolved.providerTools.map((t) => [t.name, t.defer_loading])).toEqual([
      ['contact_lookup', true],
      ['invoice_send', true],
      ['note_add', undefined],
      ['tool_search', undefined],
    ]);
    const result = await client.request<ToolResult>(
      'system.dispatcher',
      '$call',
      { session, call: { id: 'search-1', name: 'tool_search', arguments: { query: 'salary invoice', limit: 5 } } },
      { grant },
    );
    expect(result.isError).toBe(false);
    const reply = result.structured as SearchReply;
    expect(reply.tools.map((t) => t.name)).toEqual(['invoice_send']);
    expect(reply.providerResult).toEqual([{ type: 'tool_reference', tool_name: 'invoice_send' }]);
    expect(result.content).not.toMatch(/salary_export/);
  });
});
