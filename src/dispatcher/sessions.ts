/**
 * Resolutions of sessions, cached: a warm call costs a map lookup, not a `$resolve`.
 * Entries are dropped when the registry announces a change on `system.tools.events.changed`,
 * and after a TTL as a safety net for a missed event. Concurrent misses share one resolve.
 */
import type { BusClient } from '../bus/client.js';
import type { CallContext } from '../bus/context.js';
import { Mounts } from '../bus/subjects.js';
import type { Registry } from '../registry/registry.js';
import type { ResolvedTool, ResolvedToolContext, ResolveRequest } from '../registry/types.js';

/** Where resolutions come from: the registry over the bus, or one in this process. */
export interface ToolSource {
  resolve(request: ResolveRequest, ctx: CallContext): Promise<ResolvedToolContext>;
}

/** Resolves through `system.tools.$resolve`. */
export function busToolSource(client: BusClient, timeoutMs = 5_000): ToolSource {
  return {
    resolve: (request, ctx) => client.request<ResolvedToolContext>(Mounts.Tools, '$resolve', request, { ...ctx, timeoutMs }),
  };
}

/** Resolves with a registry in this process (no bus hop). */
export function localToolSource(registry: Registry): ToolSource {
  return { resolve: async (request) => registry.resolve(request) };
}

/** A resolved session, indexed for calls. */
export interface Session {
  resolved: ResolvedToolContext;
  tools: ReadonlyMap<string, ResolvedTool>;
  sdkTools: ReadonlySet<string>;
}

/** Options of the cache. */
export interface SessionCacheOptions {
  /** How long an entry lives without a change event, in ms; default 60000. */
  ttlMs?: number;
  /** Most entries; the oldest go first. Default 10000. */
  maxEntries?: number;
}

interface Entry {
  key: string;
  session: Promise<Session>;
  /** The session, once resolved. */
  value?: Session;
  expires: number;
  /** The request object of the latest lookup by key. */
  lastRequest: object;
}

/** Sessions by request, valid until the registry changes. */
export class SessionCache {
  private readonly entries = new Map<string, Entry>();
  private readonly byObject = new WeakMap<object, Entry>();
  /** Newest registry revision announced; older resolutions are served once but never kept. */
  private minRevision = 0;
  private readonly ttlMs: number;
  private readonly maxEntries: number;

  constructor(
    private readonly source: ToolSource,
    options: SessionCacheOptions = {},
  ) {
    this.ttlMs = options.ttlMs ?? 60_000;
    this.maxEntries = options.maxEntries ?? 10_000;
  }

  /**
   * The session of a request: the session itself when it is cached and resolved (so a warm
   * call takes no await), else a promise of it. A failed resolve is not cached.
   */
  get(request: ResolveRequest, ctx: CallContext): Session | Promise<Session> {
    const now = Date.now();
    // An oracle passes the same request object call after call: found without serialising it.
    const known = this.byObject.get(request);
    if (known !== undefined && known.expires > now && this.entries.get(known.key) === known) return known.value ?? known.session;
    const key = JSON.stringify(request);
    const hit = this.entries.get(key);
    if (hit !== undefined && hit.expires > now) {
      // Indexed by object only once the object comes back: requests decoded from the bus are
      // new each call, and a weak map entry for each would cost the collector more than it saves.
      if (hit.lastRequest === request) this.byObject.set(request, hit);
      else hit.lastRequest = request;
      return hit.value ?? hit.session;
    }
    const session = this.source.resolve(request, ctx).then(indexSession);
    const entry: Entry = { key, session, expires: now + this.ttlMs, lastRequest: request };
    this.entries.set(key, entry);
    const forget = () => {
      if (this.entries.get(key) === entry) this.entries.delete(key);
    };
    session.then((s) => {
      entry.value = s;
      // An instance that has not applied the announced change yet answered: do not keep it.
      if (s.resolved.revision < this.minRevision) forget();
    }, forget);
    if (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    return session;
  }

  /** Drops every entry (the registry changed); with the change's revision, keeps none older. */
  clear(revision = 0): void {
    this.entries.clear();
    this.minRevision = Math.max(this.minRevision, revision);
  }

  get size(): number {
    return this.entries.size;
  }
}

/** Indexes a resolution by tool name. */
export function indexSession(resolved: ResolvedToolContext): Session {
  return {
    resolved,
    tools: new Map(resolved.matrixTools.map((t) => [t.name, t])),
    sdkTools: new Set(resolved.sdkTools),
  };
}
