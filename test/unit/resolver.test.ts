import { describe, expect, it } from 'vitest';
import { ConflictError, NotFoundError, PayloadTooLargeError } from '../../src/bus/errors.js';
import { builtinContexts } from '../../src/registry/builtins.js';
import { digestOf } from '../../src/registry/canonical.js';
import { Registry } from '../../src/registry/registry.js';
import { resolveToolContext } from '../../src/registry/resolver.js';
import {
  StaticStore,
  type StoreChange,
  type StoredContext,
  storedBuiltin,
  type ToolContextStore,
} from '../../src/registry/store.js';
import type { MatrixToolProjection, ResolveRequest, ToolContextSpec } from '../../src/registry/types.js';

const echo = (name: string, target = 'app.echo', extra: Partial<MatrixToolProjection> = {}): MatrixToolProjection => ({
  name,
  description: `${name} tool`,
  inputSchema: { type: 'object' },
  target,
  op: '$echo',
  ...extra,
});

const ctx = (key: string, extra: Partial<ToolContextSpec> = {}): ToolContextSpec => ({
  key,
  title: `Title ${key}`,
  description: `Context ${key}`,
  permissions: { approval: 'never' },
  ...extra,
});

const builtins = new StaticStore();
/** The built-ins plus `extra` as registered contexts. */
const withExtras = (...extra: ToolContextSpec[]): StaticStore =>
  new StaticStore(
    [
      ...builtinContexts.map(storedBuiltin),
      ...extra.map((spec, i) => ({ spec, source: 'registered' as const, revision: i + 1 })),
    ],
    extra.length,
  );
const resolve = (request: ResolveRequest, store = builtins) => resolveToolContext(request, store);
const toolNames = (r: ReturnType<typeof resolve>) => r.matrixTools.map((t) => t.name);

describe('the built-in selection rules', () => {
  it.each([
    ['default', undefined, ['actor-readonly']],
    ['explain', undefined, ['actor-readonly']],
    ['monitor', undefined, ['actor-readonly']],
    ['edit', undefined, ['actor-edit']],
    ['propose', 'claude-code', ['repo-coding']],
    ['propose', 'codex', ['repo-coding']],
    ['evaluate', undefined, ['test-runner']],
  ])('gives profile %s (worker %s) the contexts %j', (profile, worker, contexts) => {
    const request: ResolveRequest = worker === undefined ? { profile } : { profile, worker };
    expect(resolve(request).contexts).toEqual(contexts);
  });

  it('gives an unknown profile no tools and says why', () => {
    const r = resolve({ profile: 'astronaut' });
    expect(r.contexts).toEqual([]);
    expect(r.matrixTools).toEqual([]);
    expect(r.diagnostics).toContainEqual(expect.objectContaining({ level: 'warning', code: 'no_builtin_rule' }));
  });

  it('gives propose with another worker no tools', () => {
    const r = resolve({ profile: 'propose', worker: 'aider' });
    expect(r.contexts).toEqual([]);
    expect(r.diagnostics[0]?.message).toContain("worker 'aider'");
  });

  it('uses explicit refs instead of the rule', () => {
    expect(resolve({ profile: 'default', toolContextRefs: ['test-runner'] }).contexts).toEqual(['test-runner']);
  });
});

describe('the merged context', () => {
  it('gates matrix_invoke by approval and nothing of actor-readonly', () => {
    const r = resolve({ profile: 'x', toolContextRefs: ['actor-readonly', 'actor-edit'] });
    expect(r.matrixTools.map((t) => [t.name, t.requiresApproval])).toEqual([
      ['matrix_introspect', false],
      ['session_state_read', false],
      ['matrix_invoke', true],
    ]);
    expect(r.matrixTools.find((t) => t.name === 'matrix_invoke')?.allowTargets).toEqual(['>']);
  });

  it("merges skills' refs after the profile's, each context once", () => {
    const r = resolve({
      profile: 'default',
      skills: [
        { name: 'a', toolContextRefs: ['test-runner', 'actor-readonly'] },
        { name: 'b', toolContextRefs: ['repo-coding'] },
      ],
    });
    expect(r.contexts).toEqual(['actor-readonly', 'test-runner', 'repo-coding']);
    // trace_query is in test-runner and repo-coding with one projection: listed once.
    expect(toolNames(r)).toEqual(['matrix_introspect', 'session_state_read', 'trace_query', 'package_validate']);
    expect(r.diagnostics).toEqual([]);
  });

  it('drops the second of two tools with one name and says which lost', () => {
    const store = withExtras(
      ctx('alpha', { matrixTools: [echo('lookup', 'app.one')] }),
      ctx('beta', { matrixTools: [echo('lookup', 'app.two')] }),
    );
    const r = resolve({ profile: 'p', toolContextRefs: ['alpha', 'beta'] }, store);
    expect(r.matrixTools).toHaveLength(1);
    expect(r.matrixTools[0]).toMatchObject({ name: 'lookup', target: 'app.one', context: 'alpha' });
    expect(r.diagnostics).toEqual([
      expect.objectContaining({ level: 'warning', code: 'tool_name_conflict', context: 'beta', tool: 'lookup' }),
    ]);
    expect(r.diagnostics[0]?.message).toMatch(/'beta'.*app\.two.*'alpha'/);
  });

  it('gates a shared tool when any context that brings it gates it', () => {
    const store = withExtras(
      ctx('open', { matrixTools: [echo('write')] }),
      ctx('gated', { matrixTools: [echo('write')], permissions: { approval: 'always' } }),
    );
    const r = resolve({ profile: 'p', toolContextRefs: ['open', 'gated'] }, store);
    expect(r.matrixTools).toEqual([
      expect.objectContaining({ name: 'write', requiresApproval: true, context: 'open' }),
    ]);
    // A context's resolved tools are shared by every resolution that merges it: the gate one
    // merge adds stays in that merge.
    expect(resolve({ profile: 'p', toolContextRefs: ['open'] }, store).matrixTools).toEqual([
      expect.objectContaining({ name: 'write', requiresApproval: false }),
    ]);
    expect(resolve({ profile: 'p', toolContextRefs: ['open', 'gated'] }, store).matrixTools[0]?.requiresApproval).toBe(
      true,
    );
  });

  it('puts each context’s instructions under its title, in order', () => {
    const r = resolve({ profile: 'p', toolContextRefs: ['test-runner', 'actor-readonly'] });
    expect(r.instructions.indexOf('## Test running')).toBe(0);
    expect(r.instructions).toContain('\n\n## Actor inspection\n\n');
  });

  it('takes the smallest timeout of contexts and tools, 30000 when none is set', () => {
    expect(resolve({ profile: 'p', toolContextRefs: ['repo-coding'] }).timeoutMs).toBe(10_000); // trace_query
    expect(resolve({ profile: 'p', toolContextRefs: ['actor-edit'] }).timeoutMs).toBe(30_000);
    const store = withExtras(ctx('plain'));
    expect(resolve({ profile: 'p', toolContextRefs: ['plain'] }, store).timeoutMs).toBe(30_000);
    const quick = withExtras(ctx('quick', { timeoutMs: 700 }));
    expect(resolve({ profile: 'p', toolContextRefs: ['actor-edit', 'quick'] }, quick).timeoutMs).toBe(700);
  });

  it("gives each tool the smaller of its own and its context's timeout", () => {
    const r = resolve({ profile: 'p', toolContextRefs: ['repo-coding', 'actor-readonly'] });
    expect(r.matrixTools.map((t) => [t.name, t.timeoutMs])).toEqual([
      ['trace_query', 10_000],
      ['package_validate', 60_000],
      ['matrix_introspect', 5_000],
      ['session_state_read', 15_000],
    ]);
  });

  it('unions environment requirements and verification', () => {
    const store = withExtras(
      ctx('creds', {
        environmentRequirements: { credentials: ['gh'], container: true },
        verification: { commands: ['npm test'], checks: ['tests-pass'] },
      }),
    );
    const r = resolve({ profile: 'p', toolContextRefs: ['repo-coding', 'creds'] }, store);
    expect(r.environmentRequirements).toEqual({ repoRoot: true, container: true, credentials: ['gh'] });
    expect(r.verification).toEqual({ checks: ['tests-pass', 'package_validate'], commands: ['npm test'] });
  });

  it('refuses a session where one name is both a bus tool and an SDK tool, in either order', () => {
    const store = withExtras(
      ctx('bus-lint', { matrixTools: [echo('local_lint')] }),
      ctx('sdk-lint', { sdkTools: ['local_lint'] }),
    );
    for (const refs of [
      ['bus-lint', 'sdk-lint'],
      ['sdk-lint', 'bus-lint'],
    ]) {
      const attempt = () => resolve({ profile: 'p', toolContextRefs: refs }, store);
      expect(attempt, refs.join()).toThrow(ConflictError);
      expect(attempt, refs.join()).toThrow(
        /'local_lint' is a bus tool of context 'bus-lint' and an SDK tool of context 'sdk-lint'/,
      );
    }
  });

  it('passes SDK tools through, never as bus tools', () => {
    const r = resolve({ profile: 'propose', worker: 'codex' });
    expect(r.sdkTools).toContain('run_shell');
    expect(toolNames(r)).not.toContain('run_shell');
  });
});

describe('refs and capabilities that cannot be met', () => {
  it('names every unknown ref', () => {
    const attempt = () =>
      resolve({
        profile: 'p',
        toolContextRefs: ['nope', 'actor-edit'],
        skills: [{ name: 's', toolContextRefs: ['gone'] }],
      });
    expect(attempt).toThrow(NotFoundError);
    expect(attempt).toThrow(/nope, gone/);
    try {
      attempt();
    } catch (err) {
      expect((err as NotFoundError).details).toEqual({ unknown: ['nope', 'gone'] });
    }
  });

  it('adds the provider of a required capability, a built-in before a registered one', () => {
    const store = withExtras(ctx('aaa-reader', { provides: ['actor.read'] }));
    const r = resolve({ profile: 'edit', requires: ['actor.read'] }, store);
    expect(r.contexts).toEqual(['actor-edit', 'actor-readonly']);
    expect(r.diagnostics).toContainEqual(
      expect.objectContaining({ code: 'capability_provided', context: 'actor-readonly' }),
    );
  });

  it('picks the lowest key among registered providers, and follows their own requires', () => {
    const store = withExtras(
      ctx('zeta', { provides: ['search'] }),
      ctx('beta', { provides: ['search'], requires: ['index'] }),
      ctx('indexer', { provides: ['index'] }),
    );
    const r = resolve({ profile: 'p', toolContextRefs: [], skills: [{ name: 's', requires: ['search'] }] }, store);
    expect(r.contexts).toEqual(['beta', 'indexer']);
  });

  it("never lets a registered context's requires pull in a built-in: the request names what it reaches", () => {
    const store = withExtras(ctx('wants-edit', { matrixTools: [echo('lookup')], requires: ['actor.edit'] }));
    const attempt = () => resolve({ profile: 'p', toolContextRefs: ['wants-edit'] }, store);
    expect(attempt).toThrow(NotFoundError);
    expect(attempt).toThrow(/only a built-in context provides 'actor.edit'.*name it in the request/);
    // Named by the request itself, the same capability is met.
    expect(resolve({ profile: 'p', toolContextRefs: ['wants-edit', 'actor-edit'] }, store).contexts).toEqual([
      'wants-edit',
      'actor-edit',
    ]);
    expect(
      resolve({ profile: 'p', toolContextRefs: ['wants-edit'], requires: ['actor.edit'] }, store).contexts,
    ).toEqual(['wants-edit', 'actor-edit']);
  });

  it('still follows a registered requirement to a registered provider', () => {
    const store = withExtras(
      ctx('wants-read', { requires: ['actor.read'] }),
      ctx('zz-reader', { provides: ['actor.read'], matrixTools: [echo('peek')] }),
    );
    expect(resolve({ profile: 'p', toolContextRefs: ['wants-read'] }, store).contexts).toEqual([
      'wants-read',
      'zz-reader',
    ]);
  });

  it('names every capability nobody provides', () => {
    expect(() => resolve({ profile: 'default', requires: ['time.travel', 'actor.read', 'teleport'] })).toThrow(
      /'time.travel', 'teleport'/,
    );
  });
});

describe('the environment', () => {
  it('leaves out a context whose requirements it does not meet, with a diagnostic', () => {
    const r = resolve({ profile: 'propose', worker: 'codex', environment: { cwd: '/tmp' } });
    expect(r.contexts).toEqual([]);
    expect(r.diagnostics).toContainEqual(
      expect.objectContaining({
        code: 'environment_unmet',
        context: 'repo-coding',
        message: expect.stringContaining('repoRoot'),
      }),
    );
  });

  it('keeps it when the environment offers what it needs', () => {
    expect(resolve({ profile: 'propose', worker: 'codex', environment: { repoRoot: '/src' } }).contexts).toEqual([
      'repo-coding',
    ]);
  });

  it('checks credentials and capabilities by name', () => {
    const store = withExtras(
      ctx('cloud', { environmentRequirements: { credentials: ['aws'], capabilities: ['gpu'] } }),
    );
    const r = resolve({ profile: 'p', toolContextRefs: ['cloud'], environment: { credentials: ['aws'] } }, store);
    expect(r.contexts).toEqual([]);
    expect(r.diagnostics[0]?.message).toContain("capability 'gpu'");
  });
});

describe('provider formats and the digest', () => {
  it('renders OpenAI, Anthropic and MCP tools', () => {
    const request: ResolveRequest = { profile: 'default' };
    const openai = resolve({ ...request, format: 'openai' }).providerTools;
    expect(openai?.[0]).toEqual({
      type: 'function',
      function: {
        name: 'matrix_introspect',
        description: expect.any(String),
        parameters: expect.objectContaining({ type: 'object' }),
      },
    });
    const anthropic = resolve({ ...request, format: 'anthropic' }).providerTools;
    expect(anthropic?.[1]).toEqual({
      name: 'session_state_read',
      description: expect.any(String),
      input_schema: expect.objectContaining({ type: 'object' }),
    });
    const mcp = resolve({ ...request, format: 'mcp' }).providerTools;
    expect(mcp?.[0]).toMatchObject({
      name: 'matrix_introspect',
      inputSchema: { type: 'object' },
      annotations: { readOnlyHint: true },
    });
    expect(resolve(request).providerTools).toBeUndefined();
  });

  it('digests the canonical JSON of the reply without revision and digest, from remembered tool texts or not', () => {
    const store = withExtras(
      ctx('open', { matrixTools: [echo('write'), echo('read')] }),
      ctx('gated', { matrixTools: [echo('write')], permissions: { approval: 'always' } }),
    );
    for (const refs of [['open'], ['open', 'gated'], ['gated', 'open'], ['open'], ['open', 'actor-readonly']]) {
      const {
        revision: _,
        digest,
        ...body
      } = resolve({ profile: 'p', toolContextRefs: refs, format: 'openai' }, store);
      expect(digest).toBe(digestOf(structuredClone(body)));
    }
  });

  it('gives equal input equal digests, and different input different ones', () => {
    const a = resolve({ profile: 'default', skills: [{ name: 's', toolContextRefs: ['test-runner'] }] });
    const b = resolve({ skills: [{ toolContextRefs: ['test-runner'], name: 's' }], profile: 'default' });
    expect(a.digest).toMatch(/^[0-9a-f]{64}$/);
    expect(b.digest).toBe(a.digest);
    expect(resolve({ profile: 'evaluate' }).digest).not.toBe(a.digest);
    expect(resolve({ profile: 'default', format: 'openai' }).digest).not.toBe(resolve({ profile: 'default' }).digest);
  });
});

/** A store that counts its reads and takes changes, as the KV store does. */
class CountingStore implements ToolContextStore {
  reads = 0;
  revision = 0;
  private readonly byKey = new Map<string, StoredContext>();
  private readonly listeners: Array<(change: StoreChange) => void> = [];

  constructor(specs: ToolContextSpec[]) {
    for (const spec of builtinContexts) this.byKey.set(spec.key, storedBuiltin(spec));
    for (const spec of specs) this.put(spec);
  }

  get(key: string): StoredContext | undefined {
    this.reads++;
    return this.byKey.get(key);
  }

  keys(): readonly string[] {
    return [...this.byKey.keys()].sort();
  }

  providersOf(capability: string): readonly string[] {
    return this.keys().filter((k) => this.byKey.get(k)?.spec.provides?.includes(capability));
  }

  onChange(listener: (change: StoreChange) => void): () => void {
    this.listeners.push(listener);
    return () => {};
  }

  put(spec: ToolContextSpec): void {
    const change = this.byKey.has(spec.key) ? 'updated' : 'registered';
    this.byKey.set(spec.key, { spec, source: 'registered', revision: ++this.revision });
    for (const l of this.listeners) l({ key: spec.key, change, revision: this.revision });
  }

  remove(key: string): void {
    this.byKey.delete(key);
    for (const l of this.listeners) l({ key, change: 'unregistered', revision: ++this.revision });
  }
}

describe('providers among many', () => {
  it('reads only as far as the first admissible provider of a capability', () => {
    const providers = Array.from({ length: 10_000 }, (_, i) =>
      ctx(`prov-${String(i).padStart(5, '0')}`, { provides: ['shared'] }),
    );
    const store = new CountingStore(providers);
    store.reads = 0;
    const r = resolveToolContext({ profile: 'p', toolContextRefs: [], requires: ['shared'] }, store);
    expect(r.contexts).toEqual(['prov-00000']);
    expect(store.reads).toBeLessThan(50);
  });

  it('still prefers a built-in provider and skips providers the environment cannot serve', () => {
    const store = withExtras(
      ctx('aaa-reads', { provides: ['actor.read'] }),
      ctx('cap-a', { provides: ['cap'], environmentRequirements: { container: true } }),
      ctx('cap-b', { provides: ['cap'] }),
    );
    expect(resolve({ profile: 'p', toolContextRefs: [], requires: ['actor.read'] }, store).contexts).toEqual([
      'actor-readonly',
    ]);
    const r = resolve({ profile: 'p', toolContextRefs: [], requires: ['cap'], environment: {} }, store);
    expect(r.contexts).toEqual(['cap-b']);
    expect(r.diagnostics.map((d) => d.code)).toEqual(['environment_unmet', 'capability_provided']);
  });
});

describe('the registry over a changing store', () => {
  const tools = (...names: string[]) => names.map((n) => echo(n));

  it('counts distinct tool names as contexts come, change and go, without rereading them all', () => {
    const store = new CountingStore(
      Array.from({ length: 1_000 }, (_, i) => ctx(`c${i}`, { matrixTools: tools(`t${i % 10}`, `own_${i}`) })),
    );
    const registry = new Registry(store);
    const recount = () =>
      new Set(store.keys().flatMap((k) => (store.get(k)?.spec.matrixTools ?? []).map((t) => t.name))).size;
    expect(registry.describe().tools).toBe(recount());
    const seed = [7, 3, 9, 1, 4, 8, 2, 6, 5, 0];
    for (let step = 0; step < 300; step++) {
      const i = (step * 37 + (seed[step % 10] as number)) % 1_200;
      if (step % 3 === 0) store.remove(`c${i}`);
      else
        store.put(ctx(`c${i}`, { matrixTools: tools(`t${step % 13}`, `own_${i}`, ...(step % 2 ? ['shared'] : [])) }));
      store.reads = 0;
      const described = registry.describe();
      expect(store.reads).toBeLessThan(5);
      expect(described.tools).toBe(recount());
    }
  });

  it('lists the targets its tools name as contexts come, change and go, without rereading them all, one array while they stay the same', () => {
    const store = new CountingStore(
      Array.from({ length: 1_000 }, (_, i) => ctx(`c${i}`, { matrixTools: [echo(`t${i}`, `app.m${i % 50}`)] })),
    );
    const registry = new Registry(store);
    const recount = () =>
      new Set(store.keys().flatMap((k) => (store.get(k)?.spec.matrixTools ?? []).map((t) => t.target)));
    expect(new Set(registry.targets())).toEqual(recount());
    for (let step = 0; step < 300; step++) {
      const i = (step * 37) % 1_200;
      const before = registry.targets();
      if (step % 3 === 0) store.remove(`c${i}`);
      else store.put(ctx(`c${i}`, { matrixTools: [echo(`t${i}`, `app.m${step % 60}`)] }));
      store.reads = 0;
      const after = registry.targets();
      expect(store.reads).toBeLessThan(5);
      expect(new Set(after)).toEqual(recount());
      // Presence keeps its snapshot while the array is the same one: it is, unless the targets changed.
      if (new Set(before).size === after.length && before.every((t) => after.includes(t))) expect(after).toBe(before);
    }
  });

  it('keeps its resolution cache within its byte bound', async () => {
    const big = ctx('big', { instructions: 'y'.repeat(50_000), matrixTools: tools('big_tool') });
    const registry = new Registry(withExtras(big), undefined, { maxBytes: 1024 * 1024 });
    for (let i = 0; i < 100; i++) await registry.resolve({ profile: `p${i}`, toolContextRefs: ['big'] });
    expect(registry.cachedBytes).toBeGreaterThan(512 * 1024);
    expect(registry.cachedBytes).toBeLessThanOrEqual(1024 * 1024);
  });

  it('refuses a $resolve request past the session request limit with payload_too_large', () => {
    const registry = new Registry();
    const huge: ResolveRequest = {
      profile: 'p',
      skills: Array.from({ length: 120 }, (_, i) => ({
        name: `s${i}`,
        toolContextRefs: Array(256).fill('actor-readonly'),
      })),
    };
    expect(() => registry.resolve(huge)).toThrow(PayloadTooLargeError);
  });
});
