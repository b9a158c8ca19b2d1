/**
 * `notifications/tools/list_changed` for 2026-07-28 clients (PROTOCOL 15): a client opens
 * `subscriptions/listen` with `toolsListChanged` and hears when *its* tools change. The SDK 2.x
 * handler owns the stream (the ack, filtering, subscription-id stamping, keepalive, teardown);
 * this is the `ServerEventBus` it reads events from. Each bridge process watches the registry's
 * change events itself, so a stream open on any replica is told, with no state shared between them.
 *
 * The SDK subscribes a stream's listener without saying whose stream it is; the HTTP leg runs each
 * request inside `serving(caller, …)`, so the listener is filed under the caller the request was
 * served as. After a registry change each caller's tools are resolved again and only the streams
 * of callers whose digest moved are told, as a 2025-11-25 session is (src/mcp/bridge.ts).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { ServerEvent, ServerEventBus } from '@modelcontextprotocol/server';
import type { NatsConnection } from '@nats-io/nats-core';
import { recheckOnChange } from '../registry/events.js';
import { DIGEST_META, type ModernCaller, REVISION_META } from './modern.js';

/** What resolving one caller's tools yields: the registry revision and the digest of the tools. */
export interface ToolsState {
  revision: number;
  digest: string;
}

/** Resolves `caller`'s tools as its `tools/list` would. */
export type ResolveTools = (caller: ModernCaller) => Promise<ToolsState>;

type Listener = (event: ServerEvent) => void;

/** The open streams of one caller and the digest of its tools they last heard of. */
interface Audience {
  caller: ModernCaller;
  listeners: Set<Listener>;
  /** Undefined while unknown (first resolve pending or failed): the next check that succeeds tells. */
  digest: Promise<string | undefined>;
}

/** The change feed of one bridge process's 2026-07-28 leg. */
export class ToolChangeFeed implements ServerEventBus {
  private readonly current = new AsyncLocalStorage<ModernCaller>();
  private readonly audiences = new Map<string, Audience>();
  /** Listeners with no caller (none is expected): told of every change. */
  private readonly everyone = new Set<Listener>();
  private stopWatching: (() => void) | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly resolve: ResolveTools,
    private readonly log: (line: string) => void = () => {},
  ) {}

  /** Runs `serve` (one request's handling) as `caller`'s, so a stream it opens is filed under that caller. */
  serving<T>(caller: ModernCaller, serve: () => T): T {
    return this.current.run(caller, serve);
  }

  publish(event: ServerEvent): void {
    for (const listener of this.everyone) deliver(listener, event);
    for (const audience of this.audiences.values()) for (const listener of audience.listeners) deliver(listener, event);
  }

  subscribe(listener: Listener): () => void {
    const caller = this.current.getStore();
    if (caller === undefined) {
      this.everyone.add(listener);
      return () => void this.everyone.delete(listener);
    }
    return this.listen(caller, listener);
  }

  /** Tells `listener` whenever `caller`'s tools change; returns a function that stops telling it (idempotent). */
  listen(caller: ModernCaller, listener: Listener): () => void {
    const key = callerKey(caller);
    let audience = this.audiences.get(key);
    if (audience === undefined) {
      audience = { caller, listeners: new Set(), digest: this.digestOf(caller) };
      this.audiences.set(key, audience);
      this.stopWatching ??= recheckOnChange(this.nc, () => this.check());
    }
    audience.listeners.add(listener);
    const mine = audience;
    let live = true;
    return () => {
      if (!live) return;
      live = false;
      mine.listeners.delete(listener);
      if (mine.listeners.size > 0 || this.audiences.get(key) !== mine) return;
      this.audiences.delete(key);
      if (this.audiences.size > 0) return;
      this.stopWatching?.();
      this.stopWatching = undefined;
    };
  }

  /** Streams open now, over every caller (what is watched). */
  get listening(): number {
    let n = this.everyone.size;
    for (const audience of this.audiences.values()) n += audience.listeners.size;
    return n;
  }

  /** Stops watching the registry; the streams themselves are the SDK handler's to close. */
  close(): void {
    this.stopWatching?.();
    this.stopWatching = undefined;
    this.audiences.clear();
    this.everyone.clear();
  }

  /** After a registry change: every caller's tools resolved again, its streams told if they moved. */
  private async check(): Promise<void> {
    for (const listener of this.everyone) deliver(listener, { kind: 'tools_list_changed' });
    await Promise.all([...this.audiences.values()].map((audience) => this.checkOne(audience)));
  }

  private async checkOne(audience: Audience): Promise<void> {
    const before = await audience.digest;
    let now: ToolsState;
    try {
      now = await this.resolve(audience.caller);
    } catch (err) {
      audience.digest = Promise.resolve(undefined);
      this.log(`registry changed, but resolving a 2026-07-28 subscriber's tools failed: ${(err as Error).message}`);
      return;
    }
    audience.digest = Promise.resolve(now.digest);
    if (now.digest === before) return;
    // Named as `tools/list` names the state it was read at: a client that has this digest is current.
    const event: ServerEvent = {
      kind: 'tools_list_changed',
      params: { _meta: { [REVISION_META]: now.revision, [DIGEST_META]: now.digest } },
    };
    for (const listener of audience.listeners) deliver(listener, event);
    this.log(
      `registry revision ${now.revision}: tools changed (digest ${now.digest.slice(0, 12)}), list_changed sent to ${audience.listeners.size} 2026-07-28 stream(s)`,
    );
  }

  private digestOf(caller: ModernCaller): Promise<string | undefined> {
    return this.resolve(caller).then(
      (state) => state.digest,
      () => undefined,
    );
  }
}

/** One key per distinct way of being served: the grant (or none) and the session it resolves. */
function callerKey(caller: ModernCaller): string {
  return `${caller.ctx.grant ?? ''}\u0000${caller.ctx.principal ?? ''}\u0000${JSON.stringify(caller.session)}`;
}

function deliver(listener: Listener, event: ServerEvent): void {
  try {
    listener(event);
  } catch {
    // A stream that fails to take an event is the SDK's to tear down; the others still get it.
  }
}
