/**
 * What the console hears from the bus and passes on to browsers: registry changes (which also
 * keep the context index current) and call events, as server-sent events on `/events`. Both
 * are coalesced: a burst of 10,000 registrations is a few `$list` requests and a few browser
 * refreshes, and a dispatcher at full speed costs a browser one event per 100 ms.
 */
import type { ServerResponse } from 'node:http';
import type { NatsConnection } from '@nats-io/nats-core';
import { type ApprovalEvent, DECIDED_EVENTS, PENDING_EVENTS } from '../approvals/types.js';
import type { CallEvent } from '../audit/events.js';
import { watchCalls } from '../audit/log.js';
import { subscribeEvents } from '../bus/events.js';
import { watchRegistry } from '../registry/events.js';
import type { ContextIndex } from './contexts-index.js';
import type { LiveKind } from './types.js';

/** How the feed paces itself; every time in ms. */
export interface LiveFeedOptions {
  /** Registry changes gathered before they are listed again. Default 25. */
  registryBatchMs?: number;
  /** Least time between two `call` events to a browser. Default 100. */
  callThrottleMs?: number;
  /** Full reload of the index besides the one after each reconnect (when events may have been lost). Default 300000. */
  resyncMs?: number;
  /** Retry of a failed load (registry not up yet). Default 2000. */
  retryMs?: number;
  /** Call events kept for the Calls page (besides `system.traces`). Default 2000. */
  recentCalls?: number;
  /** Most browsers following at once. Default 64. */
  maxClients?: number;
}

/** Bytes a browser may leave unread on its event stream. */
const MAX_UNREAD_BYTES = 256 * 1024;

/** Registry changes and calls, from the bus to the browsers that follow them. */
export class LiveFeed {
  private readonly clients = new Set<ServerResponse>();
  private readonly calls: CallEvent[] = [];
  private readonly changed = new Set<string>();
  private readonly stops: Array<() => void> = [];
  private readonly timers: NodeJS.Timeout[] = [];
  private registryTimer: NodeJS.Timeout | undefined;
  private callTimer: NodeJS.Timeout | undefined;
  private callPending = false;
  private stopped = false;
  /** Index work runs one step at a time, so a reload never overwrites a newer refresh. */
  private work: Promise<void> = Promise.resolve();
  private readonly o: Required<LiveFeedOptions>;
  /** Events sent so far; a page carries the number it was rendered at, to catch up on one it missed. */
  seq = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly index: ContextIndex,
    options: LiveFeedOptions = {},
  ) {
    this.o = {
      registryBatchMs: 25,
      callThrottleMs: 100,
      resyncMs: 300_000,
      retryMs: 2_000,
      recentCalls: 2000,
      maxClients: 64,
      ...options,
    };
  }

  /** Subscribes to the events, loads the index, and starts the resync and heartbeat timers. */
  async start(): Promise<void> {
    this.stops.push(watchRegistry(this.nc, (e) => this.onChanged(e.key)));
    this.stops.push(watchCalls(this.nc, (e) => this.onCall(e)));
    // Approvals asked and answered: rare, each passed on (the page lists them again).
    for (const subject of [PENDING_EVENTS, DECIDED_EVENTS])
      this.stops.push(
        subscribeEvents<ApprovalEvent>(this.nc, subject, (e) => this.send('approval', { approvalId: e?.approvalId })),
      );
    await this.nc.flush();
    await this.enqueue(() => this.index.reload()).catch(() => {
      // The page says the registry is unreachable; the resync timer tries again.
    });
    this.timers.push(setInterval(() => void this.resync(), this.o.resyncMs));
    this.timers.push(setInterval(() => this.index.error !== undefined && void this.resync(), this.o.retryMs));
    this.timers.push(setInterval(() => this.comment('keep-alive'), 15_000));
    for (const t of this.timers) t.unref();
    void this.resyncOnReconnect();
  }

  /** Events published while the connection was down never arrive: list everything again after each reconnect. */
  private async resyncOnReconnect(): Promise<void> {
    for await (const status of this.nc.status()) {
      if (this.stopped) break;
      if (status.type === 'reconnect') void this.resync();
    }
  }

  /** Stops listening and ends every browser's stream. */
  stop(): void {
    this.stopped = true;
    for (const stop of this.stops.splice(0)) stop();
    for (const t of this.timers.splice(0)) clearInterval(t);
    clearTimeout(this.registryTimer);
    clearTimeout(this.callTimer);
    for (const res of this.clients) res.end();
    this.clients.clear();
  }

  /** Recent call events this console heard, newest first. */
  recentCalls(): readonly CallEvent[] {
    return this.calls.slice(-this.o.recentCalls).reverse();
  }

  /** Turns a response into an event stream; false when too many browsers follow already. */
  attach(res: ServerResponse): boolean {
    if (this.clients.size >= this.o.maxClients) return false;
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-store',
      Connection: 'keep-alive',
    });
    // A page rendered before an event it then connected too late to hear refreshes on this.
    res.write(`retry: 2000\nevent: hello\ndata: ${JSON.stringify({ seq: this.seq })}\n\n`);
    this.clients.add(res);
    res.on('close', () => this.clients.delete(res));
    return true;
  }

  private enqueue(step: () => Promise<void>): Promise<void> {
    const run = this.work.then(step);
    this.work = run.catch(() => {});
    return run;
  }

  private onChanged(key: string): void {
    this.changed.add(key);
    this.registryTimer ??= setTimeout(() => {
      this.registryTimer = undefined;
      const keys = [...this.changed];
      this.changed.clear();
      void this.enqueue(() => this.index.refresh(keys)).then(
        () => this.send('registry', { keys: keys.length, revision: this.index.revision }),
        () => {
          // Listing failed (registry gone for a moment): the resync lists everything again.
        },
      );
    }, this.o.registryBatchMs);
  }

  private async resync(): Promise<void> {
    const before = this.index.revision;
    const had = this.index.error;
    await this.enqueue(() => this.index.reload()).catch(() => {});
    if (this.index.revision !== before || had !== this.index.error)
      this.send('registry', { revision: this.index.revision });
  }

  private onCall(event: CallEvent): void {
    if (!isCallEvent(event)) return;
    this.calls.push(event);
    // Trimmed in halves, not per event: a dispatcher at full speed costs a push per call.
    if (this.calls.length >= 2 * this.o.recentCalls) this.calls.splice(0, this.calls.length - this.o.recentCalls);
    if (this.callTimer !== undefined) {
      this.callPending = true;
      return;
    }
    this.send('call', { callId: event.callId });
    this.callTimer = setTimeout(() => this.releaseCalls(), this.o.callThrottleMs);
  }

  private releaseCalls(): void {
    this.callTimer = undefined;
    if (!this.callPending) return;
    this.callPending = false;
    this.send('call', {});
    this.callTimer = setTimeout(() => this.releaseCalls(), this.o.callThrottleMs);
  }

  private send(kind: LiveKind, data: Record<string, unknown>): void {
    this.seq++;
    const frame = `event: ${kind}\ndata: ${JSON.stringify({ ...data, seq: this.seq })}\n\n`;
    for (const res of this.clients) this.write(res, frame);
  }

  private comment(text: string): void {
    for (const res of this.clients) this.write(res, `: ${text}\n\n`);
  }

  /** A browser that stopped reading is let go, not buffered for without end (its script reconnects). */
  private write(res: ServerResponse, frame: string): void {
    if (res.writableLength > MAX_UNREAD_BYTES) {
      this.clients.delete(res);
      res.destroy();
      return;
    }
    res.write(frame);
  }
}

/** Whether an event has what the Calls page reads (events come off the bus: anyone may publish one). */
export function isCallEvent(e: unknown): e is CallEvent {
  const c = e as Partial<CallEvent> | null;
  return (
    typeof c === 'object' &&
    c !== null &&
    typeof c.callId === 'string' &&
    typeof c.name === 'string' &&
    typeof c.at === 'string' &&
    typeof c.durationMs === 'number'
  );
}
