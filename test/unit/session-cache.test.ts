import { describe, expect, it, vi } from 'vitest';
import { BoundedCache } from '../../src/bus/bounded-cache.js';
import { PayloadTooLargeError } from '../../src/bus/errors.js';
import { SessionCache, type ToolSource } from '../../src/dispatcher/session-cache.js';
import type { StoreChange } from '../../src/registry/store.js';
import type { ResolvedToolContext, ResolveRequest } from '../../src/registry/types.js';

function countingSource(revision = () => 1): ToolSource & { calls: number } {
  return sizedSource(0, [], revision);
}

describe('the session cache', () => {
  it('resolves a session once, whether its request object is reused or sent anew each call', async () => {
    const source = countingSource();
    const cache = new SessionCache(source);
    const request = { profile: 'p', toolContextRefs: ['a'] };
    await cache.get(request, {});
    for (let i = 0; i < 3; i++) expect(cache.get(request, {})).not.toBeInstanceOf(Promise);
    for (let i = 0; i < 3; i++)
      expect(cache.get({ profile: 'p', toolContextRefs: ['a'] }, {})).not.toBeInstanceOf(Promise);
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

/** A source that counts its resolves; each carries `instructions` of a given size and names the request's refs as contexts. */
function sizedSource(
  instructionChars: number,
  diagnostics: ResolvedToolContext['diagnostics'] = [],
  revision = () => 1,
): ToolSource & { calls: number } {
  const source = {
    calls: 0,
    resolve: async (request: ResolveRequest): Promise<ResolvedToolContext> => {
      source.calls++;
      return {
        contexts: request.toolContextRefs ?? [],
        matrixTools: [],
        sdkTools: [],
        instructions: 'x'.repeat(instructionChars),
        timeoutMs: 30_000,
        environmentRequirements: {},
        verification: {},
        diagnostics,
        revision: revision(),
        digest: '',
      };
    },
  };
  return source;
}

describe('the session cache’s bounds', () => {
  it('holds no more bytes than its bound, however many large sessions pass through it', async () => {
    const maxBytes = 4 * 1024 * 1024;
    const cache = new SessionCache(sizedSource(100_000), { maxBytes });
    for (let i = 0; i < 200; i++) await cache.get({ profile: `p${i}`, toolContextRefs: ['a'] }, {});
    // Each session is estimated at over 300 KB: 200 of them would be 60 MB.
    expect(cache.bytes).toBeLessThanOrEqual(maxBytes);
    expect(cache.bytes).toBeGreaterThan(maxBytes / 2);
    expect(cache.size).toBeLessThan(20);
  });

  it('keeps a session of a long request by a digest of it, not its text', async () => {
    const cache = new SessionCache(sizedSource(0));
    const request = {
      profile: 'p',
      skills: Array.from({ length: 100 }, (_, i) => ({
        name: `skill-${i}`,
        toolContextRefs: ['actor-readonly', 'repo-coding'],
      })),
    };
    await cache.get(request, {});
    expect(JSON.stringify(request).length).toBeGreaterThan(5_000);
    expect(cache.bytes).toBeLessThan(2_000);
    expect(cache.get(structuredClone(request), {})).not.toBeInstanceOf(Promise);
  });

  it('refuses a session request past its limit with payload_too_large, before resolving anything', () => {
    const source = sizedSource(0);
    const cache = new SessionCache(source);
    const huge = {
      profile: 'p',
      skills: Array.from({ length: 120 }, (_, i) => ({
        name: `s${i}`,
        toolContextRefs: Array(256).fill('actor-readonly'),
      })),
    };
    expect(() => cache.get(huge, {})).toThrow(PayloadTooLargeError);
    expect(() => cache.get(huge, {})).toThrow(/session request is \d+ characters of JSON, over the limit of 65536/);
    expect(source.calls).toBe(0);
    expect(cache.size).toBe(0);
  });

  it('drops expired sessions when new ones come, not only when they are asked for again', async () => {
    // The clock moves only where the test says: the new session never outlives its own TTL here.
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const cache = new SessionCache(sizedSource(10), { ttlMs: 1_000 });
      await cache.get({ profile: 'old' }, {});
      vi.setSystemTime(Date.now() + 1_001);
      await cache.get({ profile: 'new' }, {});
      expect(cache.size).toBe(1);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('the session cache hearing its source’s changes', () => {
  const changeFeed = () => {
    const listeners: Array<(change: StoreChange) => void> = [];
    return {
      onChange: (listener: (change: StoreChange) => void) => {
        listeners.push(listener);
        return () => listeners.splice(listeners.indexOf(listener), 1);
      },
      emit: (change: StoreChange) => {
        for (const l of listeners) l(change);
      },
    };
  };

  it('drops the sessions that read a changed context, and only those', async () => {
    const feed = changeFeed();
    const source = { ...sizedSource(10), onChange: feed.onChange };
    const cache = new SessionCache(source);
    await cache.get({ profile: 'p', toolContextRefs: ['a'] }, {});
    await cache.get({ profile: 'p', toolContextRefs: ['b'] }, {});
    feed.emit({ key: 'a', change: 'unregistered', revision: 1 });
    expect(cache.get({ profile: 'p', toolContextRefs: ['a'] }, {})).toBeInstanceOf(Promise);
    expect(cache.get({ profile: 'p', toolContextRefs: ['b'] }, {})).not.toBeInstanceOf(Promise);
  });

  it('drops a session that chose a capability’s provider when any context is registered', async () => {
    const feed = changeFeed();
    const chose = [{ level: 'info' as const, code: 'capability_provided', message: 'm', context: 'prov-b' }];
    const cache = new SessionCache({ ...sizedSource(10, chose), onChange: feed.onChange });
    await cache.get({ profile: 'p', requires: ['cap'] }, {});
    feed.emit({ key: 'prov-a', change: 'registered', revision: 1 });
    expect(cache.get({ profile: 'p', requires: ['cap'] }, {})).toBeInstanceOf(Promise);
  });

  it('drops by key on a change event from the bus, and everything on one that names no context', async () => {
    const cache = new SessionCache(sizedSource(10));
    await cache.get({ profile: 'p', toolContextRefs: ['a'] }, {});
    await cache.get({ profile: 'p', toolContextRefs: ['b'] }, {});
    cache.heard({ key: 'a', change: 'updated', revision: 2 });
    expect(cache.size).toBe(1);
    await cache.get({ profile: 'p', toolContextRefs: ['a'] }, {});
    cache.heard({ revision: 3 } as never);
    expect(cache.size).toBe(0);
  });

  it('stops hearing them once closed', async () => {
    const feed = changeFeed();
    const cache = new SessionCache({ ...sizedSource(10), onChange: feed.onChange });
    await cache.get({ profile: 'p', toolContextRefs: ['a'] }, {});
    cache.close();
    feed.emit({ key: 'a', change: 'unregistered', revision: 1 });
    expect(cache.get({ profile: 'p', toolContextRefs: ['a'] }, {})).not.toBeInstanceOf(Promise);
  });
});

describe('a bounded cache', () => {
  it('evicts the least recently used entries to stay within its entries and bytes, and keeps no entry larger than its bytes', () => {
    const cache = new BoundedCache<string>({ maxEntries: 3, maxBytes: 100 });
    cache.set('a', 'A', 30);
    cache.set('b', 'B', 30);
    cache.set('c', 'C', 30);
    expect(cache.get('a')).toBe('A'); // now the most recently used
    cache.set('d', 'D', 30);
    expect([cache.get('a'), cache.get('b'), cache.get('c'), cache.get('d')]).toEqual(['A', undefined, 'C', 'D']);
    cache.set('e', 'E', 60);
    expect(cache.bytes).toBeLessThanOrEqual(100);
    expect(cache.get('e')).toBe('E');
    cache.set('huge', 'H', 101);
    expect(cache.get('huge')).toBeUndefined();
    expect(cache.get('e')).toBe('E');
    cache.set('e', 'E2', 10);
    expect(cache.bytes).toBe(10 + (cache.size - 1) * 30);
  });
});
