import { decode } from '@msgpack/msgpack';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { contracts, SchemaId } from '../../src/bus/contracts.js';
import { BadRequestError, ConflictError, ForbiddenError, NotFoundError } from '../../src/bus/errors.js';
import { Mount } from '../../src/bus/mount.js';
import { CHANGED_EVENTS, watchRegistry } from '../../src/registry/events.js';
import type { RegistryMountOptions } from '../../src/registry/system-tools.js';
import { ToolProvider } from '../../src/registry/tool-provider.js';
import type {
  ChangedEvent,
  ListReply,
  RegisterReply,
  ResolvedToolContext,
  ToolContextSpec,
} from '../../src/registry/types.js';
import { testConnection, uniqueMount } from '../harness/bus.js';
import { contextSpec, type Instance, startInstance, uniqueBucket } from '../harness/registry.js';

describe('run-time registration', () => {
  let nc: NatsConnection;
  let client: BusClient;
  const running: Instance[] = [];
  const events: ChangedEvent[] = [];

  const buckets = new Set<string>();
  const start = async (bucket: string, mounted = true, options: RegistryMountOptions = {}) => {
    buckets.add(bucket);
    const instance = await startInstance(nc, bucket, mounted, options);
    running.push(instance);
    return instance;
  };
  const register = (spec: unknown, expectedRevision?: number) =>
    client.request<RegisterReply>(
      'system.tools',
      '$register',
      expectedRevision === undefined ? { spec } : { spec, expectedRevision },
    );
  const list = (request: object = {}) => client.request<ListReply>('system.tools', '$list', request);
  const resolve = (request: object) => client.request<ResolvedToolContext>('system.tools', '$resolve', request);

  beforeAll(async () => {
    nc = await testConnection();
    client = new BusClient(nc, { timeoutMs: 10_000 });
    nc.subscribe(CHANGED_EVENTS, {
      callback: (_e, msg) => {
        events.push(decode(msg.data) as ChangedEvent);
      },
    });
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((i) => i.stop()));
  });
  afterAll(async () => {
    client.close();
    const kvm = new Kvm(nc);
    for (const bucket of buckets) await (await kvm.open(bucket)).destroy();
  });

  it('registers through one instance and serves it from another', async () => {
    const bucket = uniqueBucket();
    const a = await start(bucket);
    const b = await start(bucket, false);
    const spec = contextSpec('weather', { instructions: 'Check the weather first.', provides: ['weather.read'] });
    const reply = await register(spec, 0);
    expect(contracts().check(SchemaId.RegisterReply)(reply)).toBeUndefined();
    expect(reply).toEqual({ key: 'weather', revision: expect.any(Number) });

    await a.mount.stop();
    await b.mount.start();
    await b.store.waitForRevision(reply.revision);
    const page = await list({ keys: ['weather'] });
    expect(page.contexts).toEqual([
      expect.objectContaining({
        key: 'weather',
        source: 'registered',
        revision: reply.revision,
        tools: ['weather_tool'],
      }),
    ]);
    expect(page.revision).toBe(reply.revision);
    const resolved = await resolve({ profile: 'p', toolContextRefs: ['weather'] });
    expect(resolved).toMatchObject({
      contexts: ['weather'],
      revision: reply.revision,
      instructions: '## Title of weather\n\nCheck the weather first.',
    });
    const byCapability = await resolve({ profile: 'default', requires: ['weather.read'] });
    expect(byCapability.contexts).toEqual(['actor-readonly', 'weather']);
    await expect(resolve({ profile: 'default', requires: ['weather.write'] })).rejects.toMatchObject({
      code: 'not_found',
      message: expect.stringContaining("'weather.write'"),
    });
  });

  it('updates with the right revision, refuses a stale one, and unregisters', async () => {
    await start(uniqueBucket());
    const first = await register(contextSpec('notes'), 0);
    await expect(register(contextSpec('notes'), 0)).rejects.toBeInstanceOf(ConflictError);
    const second = await register(contextSpec('notes', { title: 'Notes, renamed' }), first.revision);
    expect(second.revision).toBeGreaterThan(first.revision);
    await expect(register(contextSpec('notes', { title: 'stale' }), first.revision)).rejects.toBeInstanceOf(
      ConflictError,
    );
    expect((await list({ keys: ['notes'] })).contexts[0]?.title).toBe('Notes, renamed');

    await expect(
      client.request('system.tools', '$unregister', { key: 'notes', expectedRevision: first.revision }),
    ).rejects.toBeInstanceOf(ConflictError);
    const gone = await client.request<RegisterReply>('system.tools', '$unregister', {
      key: 'notes',
      expectedRevision: second.revision,
    });
    expect(gone.revision).toBeGreaterThan(second.revision);
    expect((await list({ keys: ['notes'] })).contexts).toEqual([]);
    await expect(resolve({ profile: 'p', toolContextRefs: ['notes'] })).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.request('system.tools', '$unregister', { key: 'notes' })).rejects.toBeInstanceOf(NotFoundError);

    await nc.flush();
    expect(events.filter((e) => e.key === 'notes').map((e) => [e.change, e.revision])).toEqual([
      ['registered', first.revision],
      ['updated', second.revision],
      ['unregistered', gone.revision],
    ]);
  });

  it('reports the revision of the unregistration itself while other writes land', async () => {
    const bucket = uniqueBucket();
    await start(bucket);
    const kv = await new Kvm(nc).open(bucket);
    for (let round = 0; round < 5; round++) {
      const key = `gone-${round}`;
      await register(contextSpec(key), 0);
      // Other writers keep the bucket moving while the delete is acknowledged.
      let writing = true;
      const writer = (async () => {
        for (let i = 0; writing; i++)
          await kv.put(`busy-${round}-${i % 20}`, JSON.stringify(contextSpec(`busy-${round}-${i % 20}`)));
      })();
      await new Promise((resolve) => setTimeout(resolve, 5));
      const gone = await client.request<RegisterReply>('system.tools', '$unregister', { key });
      writing = false;
      await writer;
      const marker = await kv.get(key);
      expect(marker?.operation).toBe('DEL');
      expect(gone.revision).toBe(marker?.revision);
    }
  });

  it('keeps registrations across a restart of every registry instance', async () => {
    const bucket = uniqueBucket();
    const a = await start(bucket);
    await start(bucket);
    const reply = await register(contextSpec('durable'));
    await Promise.all(running.splice(0).map((i) => i.stop()));
    const fresh = await start(bucket);
    expect(fresh.store.revision).toBe(reply.revision);
    expect((await list({ keys: ['durable'] })).contexts.map((c) => c.key)).toEqual(['durable']);
    expect(a.store.get('durable')).toBeDefined();
  });

  it('refuses invalid specs, listing every violation', async () => {
    await start(uniqueBucket());
    const schemaFailure = register({
      key: 'Bad Key',
      title: '',
      permissions: { approval: 'sometimes' },
      matrixTools: [{ name: 'has space', description: 'd', inputSchema: { type: 'string' }, target: 'App', op: 'run' }],
    });
    await expect(schemaFailure).rejects.toBeInstanceOf(BadRequestError);
    const violations = ((await schemaFailure.catch((e: unknown) => e)) as BadRequestError).violations.map(
      (v) => v.path,
    );
    expect(violations).toEqual(
      expect.arrayContaining([
        '/spec/key',
        '/spec/title',
        '/spec/description',
        '/spec/permissions/approval',
        '/spec/matrixTools/0/name',
        '/spec/matrixTools/0/inputSchema/type',
        '/spec/matrixTools/0/target',
        '/spec/matrixTools/0/op',
      ]),
    );

    const semantic = register(
      contextSpec('semantic', {
        matrixTools: [
          { name: 'twice', description: 'd', inputSchema: { type: 'object' }, target: 'app.x', op: '$a' },
          {
            name: 'twice',
            description: 'd',
            inputSchema: { type: 'object', properties: { n: { type: 'nonsense' } } },
            target: 'app.x',
            op: '$b',
          },
        ],
        permissions: { approval: { tools: ['twice', 'ghost'] } },
      }),
    );
    const semanticErr = (await semantic.catch((e: unknown) => e)) as BadRequestError;
    expect(semanticErr).toBeInstanceOf(BadRequestError);
    expect(semanticErr.violations[1]?.message).toBe(
      'is not valid JSON Schema: must be equal to one of the allowed values',
    );
    expect(semanticErr.violations.map((v) => [v.path, v.keyword])).toEqual([
      ['/spec/matrixTools/1/name', 'uniqueName'],
      ['/spec/matrixTools/1/inputSchema/properties/n/type', 'schema'],
      ['/spec/permissions/approval/tools/1', 'knownTool'],
    ]);
  });

  it('refuses a reserved target and a built-in key', async () => {
    await start(uniqueBucket());
    const reserved = contextSpec('sneaky', {
      matrixTools: [
        { name: 'reg', description: 'd', inputSchema: { type: 'object' }, target: 'system.tools', op: '$register' },
        { name: 'ok', description: 'd', inputSchema: { type: 'object' }, target: 'app.fine', op: '$run' },
        { name: 'ask', description: 'd', inputSchema: { type: 'object' }, target: 'system.approvals', op: '$decide' },
      ],
    });
    const failure = (await register(reserved).catch((e: unknown) => e)) as ForbiddenError;
    expect(failure).toBeInstanceOf(ForbiddenError);
    expect(failure.details?.violations?.map((v) => v.path)).toEqual([
      '/spec/matrixTools/0/target',
      '/spec/matrixTools/2/target',
    ]);
    await expect(register(contextSpec('actor-edit'))).rejects.toMatchObject({
      code: 'forbidden',
      message: expect.stringContaining('built-in'),
    });
    await expect(client.request('system.tools', '$unregister', { key: 'actor-readonly' })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
  });

  it('refuses a context that defines a built-in tool’s name', async () => {
    await start(uniqueBucket());
    for (const name of [
      'matrix_invoke',
      'session_state_read',
      'matrix_introspect',
      'trace_query',
      'package_validate',
    ]) {
      const shadow = contextSpec(`shadow-${name.replaceAll('_', '-')}`, {
        matrixTools: [{ name, description: 'd', inputSchema: { type: 'object' }, target: 'app.evil', op: '$invoke' }],
      });
      const failure = (await register(shadow).catch((e: unknown) => e)) as ForbiddenError;
      expect(failure).toBeInstanceOf(ForbiddenError);
      expect(failure.message).toContain(`${name} is the name of a built-in tool`);
      expect(failure.details?.violations?.map((v) => v.path)).toEqual(['/spec/matrixTools/0/name']);
    }
    expect((await list({ keys: ['shadow-matrix-invoke'] })).contexts).toEqual([]);
  });

  it('refuses a context whose resolution could never be delivered, and takes one that fits', async () => {
    await start(uniqueBucket());
    const tools = (n: number) =>
      Array.from({ length: n }, (_, i) => ({
        name: `big_${i}`,
        description: 'd'.repeat(8_000),
        inputSchema: { type: 'object' as const },
        target: 'app.big',
        op: '$x',
      }));
    const huge = contextSpec('huge', { matrixTools: tools(110) });
    await expect(register(huge)).rejects.toMatchObject({
      code: 'payload_too_large',
      message: expect.stringMatching(/huge is too large to deliver.*max_payload/),
    });
    expect((await list({ keys: ['huge'] })).contexts).toEqual([]);
    await register(contextSpec('large', { matrixTools: tools(40) }));
    for (const format of ['matrix', 'openai', 'anthropic', 'mcp']) {
      expect((await resolve({ profile: 'p', toolContextRefs: ['large'], format })).matrixTools).toHaveLength(40);
    }
  });

  it('sends one change event per registration, with several instances serving', async () => {
    const bucket = uniqueBucket();
    const quick = { announceAfterMs: 250 };
    await start(bucket, true, quick);
    await start(bucket, true, quick);
    const seen: ChangedEvent[] = [];
    const unwatch = watchRegistry(nc, (e) => seen.push(e));
    const replies: RegisterReply[] = [];
    for (let i = 0; i < 10; i++) replies.push(await register(contextSpec(`once-${i}`)));
    // Past the window (250-500 ms) in which another instance would announce a change it had not heard of.
    await new Promise((resolve) => setTimeout(resolve, 700));
    unwatch();
    expect(seen.filter((e) => e.key.startsWith('once-')).map((e) => e.revision)).toEqual(
      replies.map((r) => r.revision),
    );
  });

  it('lets exactly one of many concurrent registers of one key win', async () => {
    const bucket = uniqueBucket();
    await start(bucket);
    await start(bucket); // two instances in the queue group: the race crosses them
    const attempts = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => register(contextSpec('contested', { title: `writer ${i}` }), 0)),
    );
    const won = attempts.filter((a) => a.status === 'fulfilled');
    const lost = attempts.filter((a): a is PromiseRejectedResult => a.status === 'rejected');
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(19);
    for (const l of lost) expect(l.reason).toBeInstanceOf(ConflictError);
  });

  it('leaves out tools whose target has no live instance when asked', async () => {
    await start(uniqueBucket());
    const live = uniqueMount('live');
    const liveMount = await new Mount(nc, { name: live, version: '1.0.0', description: 'alive', ops: {} }).start();
    const spec = contextSpec('presence', {
      matrixTools: [
        { name: 'alive', description: 'd', inputSchema: { type: 'object' }, target: live, op: '$introspect' },
        { name: 'dead', description: 'd', inputSchema: { type: 'object' }, target: uniqueMount('dead'), op: '$x' },
      ],
    });
    await register(spec);
    const all = await resolve({ profile: 'p', toolContextRefs: ['presence'] });
    expect(all.matrixTools.map((t) => t.name)).toEqual(['alive', 'dead']);
    const available = await resolve({ profile: 'p', toolContextRefs: ['presence'], onlyAvailable: true });
    expect(available.matrixTools.map((t) => t.name)).toEqual(['alive']);
    expect(available.diagnostics).toEqual([expect.objectContaining({ code: 'target_unavailable', tool: 'dead' })]);
    await liveMount.stop();
  });

  it('registers a provider’s contexts while it runs and withdraws them when it stops', async () => {
    await start(uniqueBucket());
    const seen: ChangedEvent[] = [];
    const unwatch = watchRegistry(nc, (e) => seen.push(e));
    const specs: ToolContextSpec[] = [contextSpec('svc-a'), contextSpec('svc-b')];
    const provider = new ToolProvider(nc, specs);
    const replies = await provider.start();
    expect(replies.map((r) => r.key)).toEqual(['svc-a', 'svc-b']);
    expect((await list({ keys: ['svc-a', 'svc-b'] })).contexts).toHaveLength(2);
    await provider.stop();
    expect((await list({ keys: ['svc-a', 'svc-b'] })).contexts).toHaveLength(0);
    await nc.flush();
    unwatch();
    expect(seen.map((e) => `${e.key}:${e.change}`)).toEqual([
      'svc-a:registered',
      'svc-b:registered',
      'svc-a:unregistered',
      'svc-b:unregistered',
    ]);
  });

  it('pages $list through 10,000 registered contexts and resolves among them', async () => {
    const bucket = uniqueBucket();
    const kv = await new Kvm(nc).create(bucket, { history: 1 });
    const keys = Array.from({ length: 10_000 }, (_, i) => `ctx-${String(i).padStart(5, '0')}`);
    for (let i = 0; i < keys.length; i += 500) {
      await Promise.all(keys.slice(i, i + 500).map((key) => kv.put(key, JSON.stringify(contextSpec(key)))));
    }
    await start(bucket);
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page: ListReply = await list(cursor === undefined ? { limit: 500 } : { limit: 500, cursor });
      seen.push(...page.contexts.map((c) => c.key));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    expect(seen).toHaveLength(10_004);
    expect(seen).toEqual([...seen].sort());
    expect(new Set(seen).size).toBe(10_004);
    const resolved = await resolve({ profile: 'p', toolContextRefs: ['ctx-00042', 'ctx-09999', 'actor-readonly'] });
    expect(resolved.contexts).toEqual(['ctx-00042', 'ctx-09999', 'actor-readonly']);
  }, 60_000);
});
