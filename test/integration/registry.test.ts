import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { contracts, SchemaId } from '../../src/bus/contracts.js';
import { NotFoundError } from '../../src/bus/errors.js';
import type { Mount } from '../../src/bus/mount.js';
import { builtinContexts } from '../../src/registry/builtins.js';
import { Registry } from '../../src/registry/registry.js';
import { StaticStore, storedBuiltin } from '../../src/registry/store.js';
import { registryMount } from '../../src/registry/system-tools.js';
import type {
  IntrospectReply,
  ListReply,
  ResolvedToolContext,
  ResolveRequest,
  ToolContextSpec,
} from '../../src/registry/types.js';
import { testConnection } from '../harness/bus.js';

const extra = (key: string, tools: Array<[string, string]>, more: Partial<ToolContextSpec> = {}): ToolContextSpec => ({
  key,
  title: `Title of ${key}`,
  description: `The ${key} context`,
  instructions: `Use ${key} well.`,
  matrixTools: tools.map(([name, target]) => ({
    name,
    description: name,
    inputSchema: { type: 'object' },
    target,
    op: '$run',
  })),
  permissions: { approval: 'never' },
  ...more,
});

const registered = [
  extra('lookup-a', [['lookup', 'app.alpha']]),
  extra('lookup-b', [['lookup', 'app.beta']]),
  extra('secrets', [['vault_read', 'app.vault']], { environmentRequirements: { credentials: ['vault'] } }),
];

const conformsTo = (id: string, value: unknown) => expect(contracts().check(id)(value)).toBeUndefined();

describe.each([
  { encoding: 'MessagePack', json: false },
  { encoding: 'JSON', json: true },
])('system.tools over the wire in $encoding', ({ json }) => {
  let nc: NatsConnection;
  let mount: Mount;
  let client: BusClient;
  const resolve = (request: ResolveRequest) =>
    client.request<ResolvedToolContext>('system.tools', '$resolve', request, { json });

  beforeAll(async () => {
    nc = await testConnection();
    const store = new StaticStore(
      [
        ...builtinContexts.map(storedBuiltin),
        ...registered.map((spec, i) => ({ spec, source: 'registered' as const, revision: i + 1 })),
      ],
      3,
    );
    mount = await registryMount(nc, { registry: new Registry(store) }).start();
    client = new BusClient(nc, { timeoutMs: 5_000 });
  });
  afterAll(async () => {
    client.close();
    await mount.stop();
  });

  it.each([
    ['default', undefined, ['actor-readonly'], ['matrix_introspect', 'session_state_read']],
    ['explain', undefined, ['actor-readonly'], ['matrix_introspect', 'session_state_read']],
    ['monitor', undefined, ['actor-readonly'], ['matrix_introspect', 'session_state_read']],
    ['edit', undefined, ['actor-edit'], ['matrix_invoke']],
    ['propose', 'claude-code', ['repo-coding'], ['trace_query', 'package_validate']],
    ['propose', 'codex', ['repo-coding'], ['trace_query', 'package_validate']],
    ['evaluate', undefined, ['test-runner'], ['trace_query']],
    ['unknown-profile', undefined, [], []],
  ])('$resolve by the built-in rule: %s (worker %s)', async (profile, worker, contexts, tools) => {
    const reply = await resolve(worker === undefined ? { profile } : { profile, worker });
    conformsTo(SchemaId.ResolveReply, reply);
    expect(reply.contexts).toEqual(contexts);
    expect(reply.matrixTools.map((t) => t.name)).toEqual(tools);
    expect(reply.revision).toBe(3);
    if (contexts.length === 0) expect(reply.diagnostics.map((d) => d.code)).toEqual(['no_builtin_rule']);
  });

  it('$resolve gates matrix_invoke and passes repo-coding its SDK tools', async () => {
    expect((await resolve({ profile: 'edit' })).matrixTools[0]).toMatchObject({
      name: 'matrix_invoke',
      requiresApproval: true,
      context: 'actor-edit',
    });
    expect((await resolve({ profile: 'propose', worker: 'codex' })).sdkTools).toContain('run_shell');
  });

  it('$resolve uses explicit refs and merges skills in order', async () => {
    const reply = await resolve({
      profile: 'default',
      toolContextRefs: ['test-runner'],
      skills: [
        { name: 'inspect', toolContextRefs: ['actor-readonly'] },
        { name: 'again', toolContextRefs: ['test-runner'] },
      ],
    });
    expect(reply.contexts).toEqual(['test-runner', 'actor-readonly']);
    expect(reply.instructions.split('\n').filter((l) => l.startsWith('## '))).toEqual([
      '## Test running',
      '## Actor inspection',
    ]);
  });

  it('$resolve keeps the first of two tools named alike and names the loser', async () => {
    const reply = await resolve({ profile: 'p', toolContextRefs: ['lookup-a', 'lookup-b'] });
    expect(reply.matrixTools).toEqual([
      expect.objectContaining({ name: 'lookup', target: 'app.alpha', context: 'lookup-a' }),
    ]);
    expect(reply.diagnostics).toEqual([
      expect.objectContaining({ code: 'tool_name_conflict', context: 'lookup-b', tool: 'lookup' }),
    ]);
  });

  it('$resolve answers not_found naming every unknown ref', async () => {
    const failure = resolve({
      profile: 'p',
      toolContextRefs: ['ghost', 'lookup-a'],
      skills: [{ name: 's', toolContextRefs: ['phantom'] }],
    });
    await expect(failure).rejects.toBeInstanceOf(NotFoundError);
    await expect(failure).rejects.toMatchObject({
      code: 'not_found',
      message: expect.stringContaining('ghost, phantom'),
      details: { unknown: ['ghost', 'phantom'] },
    });
  });

  it('$resolve leaves out contexts the environment cannot serve', async () => {
    const reply = await resolve({
      profile: 'p',
      toolContextRefs: ['secrets', 'actor-readonly'],
      environment: { credentials: ['github'] },
    });
    expect(reply.contexts).toEqual(['actor-readonly']);
    expect(reply.diagnostics).toEqual([expect.objectContaining({ code: 'environment_unmet', context: 'secrets' })]);
    const served = await resolve({
      profile: 'p',
      toolContextRefs: ['secrets'],
      environment: { credentials: ['vault'] },
    });
    expect(served.contexts).toEqual(['secrets']);
  });

  it.each(['openai', 'anthropic', 'mcp'] as const)('$resolve renders the %s tool format', async (format) => {
    const reply = await resolve({ profile: 'default', format });
    conformsTo(SchemaId.ResolveReply, reply);
    expect(reply.providerTools).toHaveLength(2);
    const names = reply.providerTools?.map((t) => ('function' in t ? t.function.name : 'name' in t ? t.name : t.type));
    expect(names).toEqual(['matrix_introspect', 'session_state_read']);
  });

  it('$resolve gives the same digest and order for the same input, also from a fresh registry', async () => {
    const request: ResolveRequest = {
      profile: 'evaluate',
      skills: [{ name: 's', toolContextRefs: ['actor-readonly', 'lookup-b'] }],
    };
    const first = await resolve(request);
    const second = await resolve(request);
    expect(second).toEqual(first);
    const fresh = new Registry(
      new StaticStore(
        [
          ...builtinContexts.map(storedBuiltin),
          ...registered.map((spec, i) => ({ spec, source: 'registered' as const, revision: i + 1 })),
        ],
        3,
      ),
    );
    expect((await fresh.resolve(request)).digest).toBe(first.digest);
  });

  it('$list pages through every context in key order', async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page: ListReply = await client.request(
        'system.tools',
        '$list',
        cursor === undefined ? { limit: 2 } : { limit: 2, cursor },
        { json },
      );
      conformsTo(SchemaId.ListReply, page);
      seen.push(...page.contexts.map((c) => c.key));
      cursor = page.nextCursor;
      pages++;
    } while (cursor !== undefined);
    expect(seen).toEqual([
      'actor-edit',
      'actor-readonly',
      'lookup-a',
      'lookup-b',
      'repo-coding',
      'secrets',
      'test-runner',
    ]);
    expect(pages).toBe(4);
  });

  it('$list filters by keys and by tool, and tells built-in from registered', async () => {
    const byTool: ListReply = await client.request('system.tools', '$list', { tool: 'trace_query' }, { json });
    expect(byTool.contexts.map((c) => c.key)).toEqual(['repo-coding', 'test-runner']);
    const byKeys: ListReply = await client.request(
      'system.tools',
      '$list',
      { keys: ['secrets', 'actor-edit', 'nope'] },
      { json },
    );
    expect(byKeys.contexts.map((c) => [c.key, c.source, c.revision])).toEqual([
      ['actor-edit', 'built-in', 0],
      ['secrets', 'registered', 3],
    ]);
    expect(byKeys.revision).toBe(3);
  });

  it('$introspect describes the mount, its ops with schemas, and this instance', async () => {
    const reply: IntrospectReply = await client.request('system.tools', '$introspect', {}, { json });
    conformsTo(SchemaId.IntrospectReply, reply);
    expect(reply).toMatchObject({
      mount: 'system.tools',
      revision: 3,
      contexts: 7,
      tools: 7,
      instance: { id: mount.id },
    });
    expect(reply.ops.map((o) => o.op)).toEqual([
      '$introspect',
      '$list',
      '$resolve',
      '$search',
      '$register',
      '$unregister',
      '$revoke',
    ]);
    expect(reply.ops.find((o) => o.op === '$resolve')?.requestSchema.$id).toBe(SchemaId.ResolveRequest);
  });

  it('$register answers unavailable over a store without JetStream', async () => {
    const spec = extra('newcomer', [['new_tool', 'app.new']]);
    await expect(client.request('system.tools', '$register', { spec }, { json })).rejects.toMatchObject({
      code: 'unavailable',
      message: expect.stringContaining('without JetStream'),
    });
  });
});
