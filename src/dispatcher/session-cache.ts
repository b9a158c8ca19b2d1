/**
 * Resolutions of sessions, cached: a warm call costs a map lookup, not a `$resolve`.
 * Entries are dropped when the registry announces a change on `system.tools.events.changed`;
 * with a registry in this process, as soon as its store applies a change that touches them
 * (a direct write to the bucket included); and after a TTL as a safety net for a missed
 * event. Concurrent misses share one resolve. Bounded in entries and in bytes.
 */
import type { BusClient } from '../bus/client.js';
import { MAX_SESSION_REQUEST_CHARS, sessionKey } from '../bus/codec.js';
import type { CallContext } from '../bus/context.js';
import { Mounts } from '../bus/subjects.js';
import type { Registry } from '../registry/registry.js';
import type { StoreChange } from '../registry/store.js';
import type { ResolvedTool, ResolvedToolContext, ResolveRequest } from '../registry/types.js';
import { cacheLookups } from '../telemetry/caches.js';

/** Where resolutions come from: the registry over the bus, or one in this process. */
export interface ToolSource {
  resolve(request: ResolveRequest, ctx: CallContext): Promise<ResolvedToolContext>;
  /**
   * Calls `listener` for each change of the contexts, where the source can see them (a registry in
   * this process); returns a function that stops it.
   */
  onChange?(listener: (change: StoreChange) => void): () => void;
}

/** Resolves through `system.tools.$resolve`. */
export function busToolSource(client: BusClient, timeoutMs = 5_000): ToolSource {
  return {
    resolve: (request, ctx) =>
      client.request<ResolvedToolContext>(Mounts.Tools, '$resolve', request, { ...ctx, timeoutMs }),
  };
}

/** Resolves with a registry in this process (no bus hop), and hears every change of its store. */
export function localToolSource(registry: Registry): ToolSource {
  return { resolve: async (request) => registry.resolve(request), onChange: (listener) => registry.onChange(listener) };
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
  /** Most entries; the least recently used go first. Default 10000. */
  maxEntries?: number;
  /** Most bytes the entries may hold, by estimate (request key + 3 × the resolution's JSON text); default 64 MiB. */
  maxBytes?: number;
  /**
   * Most characters of a session request's JSON text; default `MAX_SESSION_REQUEST_CHARS` (64 KiB).
   * Longer → `payload_too_large`.
   */
  maxRequestChars?: number;
}

interface Entry {
  key: string;
  session: Promise<Session>;
  /** The session, once resolved. */
  value?: Session;
  expires: number;
  /** The request object of the latest lookup by key (kept only for short requests). */
  lastRequest?: object;
  /** Estimated bytes; the key's alone until the session is resolved. */
  bytes: number;
  /** Context keys the resolution read (merged, left out or in conflict): a change of one drops the entry. */
  keys?: ReadonlySet<string>;
  /** The resolution chose a capability's provider: any new or updated context may be a better one. */
  choseProviders?: boolean;
}

/** Fixed cost of an entry beyond its key and resolution, in bytes (maps, closures, promise). */
const ENTRY_OVERHEAD = 512;
/** Requests whose JSON text is at most this long are remembered by object too. */
const REMEMBERED_REQUEST_CHARS = 1024;

/** Sessions by request, valid until the registry changes; bounded in entries and bytes. */
export class SessionCache {
  private readonly entries = new Map<string, Entry>();
  private readonly byObject = new WeakMap<object, Entry>();
  /** Newest registry revision announced; older resolutions are served once but never kept. */
  private minRevision = 0;
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly maxBytes: number;
  private readonly maxRequestChars: number;
  private totalBytes = 0;
  private readonly stopHearing: () => void;

  constructor(
    private readonly source: ToolSource,
    options: SessionCacheOptions = {},
  ) {
    this.ttlMs = options.ttlMs ?? 60_000;
    this.maxEntries = options.maxEntries ?? 10_000;
    this.maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
    this.maxRequestChars = options.maxRequestChars ?? MAX_SESSION_REQUEST_CHARS;
    this.stopHearing = source.onChange?.((change) => this.changed(change)) ?? (() => {});
  }

  /**
   * The session of a request: the session itself when it is cached and resolved (so a warm
   * call takes no await), else a promise of it. A failed resolve is not cached. Throws
   * `PayloadTooLargeError` for a request past `maxRequestChars`.
   */
  get(request: ResolveRequest, ctx: CallContext): Session | Promise<Session> {
    const now = Date.now();
    // An oracle passes the same request object call after call: found without serialising it.
    const known = this.byObject.get(request);
    if (known !== undefined && known.expires > now && this.entries.get(known.key) === known) {
      cacheLookups.sessions.hit++;
      return known.value ?? known.session;
    }
    const text = JSON.stringify(request);
    const key = sessionKey(text, this.maxRequestChars);
    const hit = this.entries.get(key);
    if (hit !== undefined && hit.expires > now) {
      // Indexed by object only once the object comes back: requests decoded from the bus are
      // new each call, and a weak map entry for each would cost the collector more than it saves.
      if (hit.lastRequest === request) this.byObject.set(request, hit);
      else if (text.length <= REMEMBERED_REQUEST_CHARS) hit.lastRequest = request;
      cacheLookups.sessions.hit++;
      return hit.value ?? hit.session;
    }
    if (hit !== undefined) this.drop(hit);
    cacheLookups.sessions.miss++;
    return this.resolve(key, text, request, now, ctx);
  }

  /** Drops every entry (the registry changed); with the change's revision, keeps none older. */
  clear(revision = 0): void {
    this.entries.clear();
    this.totalBytes = 0;
    this.minRevision = Math.max(this.minRevision, revision);
  }

  /**
   * A change event from the bus: the entries it may alter are dropped; an event that does not
   * say which context changed drops them all.
   */
  heard(event: Partial<StoreChange> | undefined): void {
    const revision = Number(event?.revision) || 0;
    const change = event?.change;
    if (
      typeof event?.key !== 'string' ||
      (change !== 'registered' && change !== 'updated' && change !== 'unregistered')
    )
      this.clear(revision);
    else this.changed({ key: event.key, change, revision });
  }

  /**
   * Drops the entries a change of one context may alter: those that read it, and on a new or
   * updated context those that chose a provider.
   */
  changed(change: StoreChange): void {
    this.minRevision = Math.max(this.minRevision, change.revision);
    const couldProvide = change.change !== 'unregistered';
    for (const entry of this.entries.values()) {
      if (entry.value === undefined) continue; // still resolving: judged by revision when it ends
      if (entry.keys?.has(change.key) || (couldProvide && entry.choseProviders)) this.drop(entry);
    }
  }

  /** Stops hearing the source's changes. */
  close(): void {
    this.stopHearing();
  }

  get size(): number {
    return this.entries.size;
  }

  /** Estimated bytes held. */
  get bytes(): number {
    return this.totalBytes;
  }

  private resolve(key: string, text: string, request: ResolveRequest, now: number, ctx: CallContext): Promise<Session> {
    const session = this.source.resolve(request, ctx).then(indexSession);
    const entry: Entry = { key, session, expires: now + this.ttlMs, bytes: key.length + ENTRY_OVERHEAD };
    if (text.length <= REMEMBERED_REQUEST_CHARS) entry.lastRequest = request;
    this.add(entry);
    session.then(
      (s) => {
        if (this.entries.get(key) !== entry) return;
        // An instance that has not applied the announced change yet answered: do not keep it.
        if (s.resolved.revision < this.minRevision) return this.drop(entry);
        entry.value = s;
        entry.keys = keysRead(s.resolved);
        entry.choseProviders = s.resolved.diagnostics.some((d) => d.code === 'capability_provided');
        this.resize(entry, entry.bytes + 3 * JSON.stringify(s.resolved).length);
      },
      () => {
        if (this.entries.get(key) === entry) this.drop(entry);
      },
    );
    return session;
  }

  private add(entry: Entry): void {
    this.entries.set(entry.key, entry);
    this.totalBytes += entry.bytes;
    this.evict();
  }

  private resize(entry: Entry, bytes: number): void {
    this.totalBytes += bytes - entry.bytes;
    entry.bytes = bytes;
    if (bytes > this.maxBytes) this.drop(entry);
    else this.evict();
  }

  private drop(entry: Entry): void {
    if (this.entries.get(entry.key) !== entry) return;
    this.entries.delete(entry.key);
    this.totalBytes -= entry.bytes;
  }

  /**
   * Least recently resolved first (a hit does not reorder: the warm path stays a lookup).
   * Entries are in the order they expire, too: expired ones at the front go as well.
   */
  private evict(now = Date.now()): void {
    for (const oldest of this.entries.values()) {
      if (this.entries.size <= this.maxEntries && this.totalBytes <= this.maxBytes && oldest.expires > now) return;
      this.drop(oldest);
    }
  }
}

/** Keys of the contexts a resolution read: merged, left out for the environment, or named in a diagnostic. */
function keysRead(resolved: ResolvedToolContext): ReadonlySet<string> {
  const keys = new Set(resolved.contexts);
  for (const d of resolved.diagnostics) if (d.context !== undefined) keys.add(d.context);
  return keys;
}

/** Indexes a resolution by tool name. */
export function indexSession(resolved: ResolvedToolContext): Session {
  return {
    resolved,
    tools: new Map(resolved.matrixTools.map((t) => [t.name, t])),
    sdkTools: new Set(resolved.sdkTools),
  };
}
