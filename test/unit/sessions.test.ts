import { describe, expect, it } from 'vitest';
import { SessionCache, type ToolSource } from '../../src/dispatcher/sessions.js';
import type { ResolvedToolContext, ResolveRequest } from '../../src/registry/types.js';

function countingSource(revision = () => 1): ToolSource & { calls: number } {
  const source = {
    calls: 0,
    resolve: async (request: ResolveRequest): Promise<ResolvedToolContext> => {
      source.calls++;
      return {
        contexts: request.toolContextRefs ?? [],
        matrixTools: [],
        sdkTools: [],
        instructions: '',
        timeoutMs: 30_000,
        environmentRequirements: {},
        verification: {},
        diagnostics: [],
        revision: revision(),
        digest: '',
      } as unknown as ResolvedToolContext;
    },
  };
  return source;
}

describe('the session cache', () => {
  it('resolves a session once, whether its request object is reused or sent anew each call', async () => {
    const source = countingSource();
    const cache = new SessionCache(source);
    const request = { profile: 'p', toolContextRefs: ['a'] };
    await cache.get(request, {});
    for (let i = 0; i < 3; i++) expect(cache.get(request, {})).not.toBeInstanceOf(Promise);
    for (let i = 0; i < 3; i++) expect(cache.get({ profile: 'p', toolContextRefs: ['a'] }, {})).not.toBeInstanceOf(Promise);
    expect(source.calls).toBe(1);
  });

  it('shares one resolve among concurrent misses and resolves again after a change', async () => {
    const source = countingSource();
    const cache = new SessionCache(source);
    const request = { profile: 'p' };
    await Promise.all([cache.get(request, {}), cache.get({ profile: 'p' }, {}), cache.get(request, {})]);
    expect(source.calls).toBe(1);
    cache.clear(1);
    await cache.get(request, {});
    expect(source.calls).toBe(2);
  });

  it('serves but does not keep a resolution older than an announced change', async () => {
    const source = countingSource(() => 4);
    const cache = new SessionCache(source);
    cache.clear(5);
    const request = { profile: 'p' };
    await cache.get(request, {});
    await cache.get(request, {});
    expect(source.calls).toBe(2);
    expect(cache.size).toBe(0);
  });
});
