/**
 * `system.traces.$query` over the durable trail: newest first, a page at a time. By trace id
 * it reads the batches stored since the indexer's ack floor (not indexed yet) and those the
 * index names below it; otherwise it walks the stream backwards from the newest batch (or from
 * the `until` time, found by bisection). Either reads a bounded number of batches per page.
 * `queryTrail` pages through the trail, then through its overflow stream.
 */
import { traceIdOf } from '../bus/headers.js';
import type { StreamBounds } from '../bus/stream-store.js';
import type { CallEvent } from './events.js';
import type { StoredBatch } from './stream.js';

/** A `$query` request. */
export interface TraceQuery {
  traceId?: string;
  tool?: string;
  session?: string;
  principal?: string;
  outcome?: 'ok' | 'error' | 'cancelled';
  /** ISO 8601; events at or after it. */
  since?: string;
  /** ISO 8601; events before it. */
  until?: string;
  /** Default `DEFAULT_LIMIT` (50). */
  limit?: number;
  /** The `next` of the previous page: continue with older events. */
  cursor?: string;
}

/** A `$query` reply. */
export interface TraceQueryReply {
  /** Matching events, newest first. */
  events: CallEvent[];
  /** Events that matched in what this page read (more exist when `next` is set). */
  matched: number;
  /** Events (in memory) or batches of events (in the stream) kept. */
  kept: number;
  /** Cursor of the next page; absent on the last. */
  next?: string;
}

/** What a stream query reads; `AuditStream` and its `OverflowStream` are two. */
export interface BatchSource {
  bounds(): Promise<StreamBounds>;
  batch(seq: number): Promise<StoredBatch | null>;
  batchesOf(traceId: string): Promise<number[]>;
  indexedThrough(): Promise<number>;
}

/** Events a page holds when its query names no `limit`. */
export const DEFAULT_LIMIT = 50;

/** The most events a page of this query holds. */
export function limitOf(q: TraceQuery): number {
  return q.limit ?? DEFAULT_LIMIT;
}

/** A query's filters, parsed once. */
export interface Filter {
  query: TraceQuery;
  sinceMs: number | undefined;
  untilMs: number | undefined;
}

/** Parses a query's times. */
export function filterOf(q: TraceQuery): Filter {
  return {
    query: q,
    sinceMs: q.since === undefined ? undefined : Date.parse(q.since),
    untilMs: q.until === undefined ? undefined : Date.parse(q.until),
  };
}

/** Does an event match every filter of a query? */
export function matches(e: CallEvent, f: Filter): boolean {
  const q = f.query;
  if (q.tool !== undefined && e.name !== q.tool) return false;
  if (q.outcome !== undefined && e.outcome !== q.outcome) return false;
  if (q.session !== undefined && e.session !== q.session) return false;
  if (q.principal !== undefined && e.principal !== q.principal) return false;
  if (q.traceId !== undefined && traceIdOf(e.traceparent) !== q.traceId) return false;
  if (f.sinceMs === undefined && f.untilMs === undefined) return true;
  const at = Date.parse(e.at);
  if (f.sinceMs !== undefined && !(at >= f.sinceMs)) return false;
  return f.untilMs === undefined || at < f.untilMs;
}

/** Most batches one page reads when scanning (a page that stops there has a `next`). */
export const SCAN_BUDGET = 4096;
/** Most batches one page of a trace-id query reads (a flooded trace id pages, it does not stall). */
export const TRACE_BUDGET = 1024;
/** Batches read at once. */
const WINDOW = 32;
/** How much later than its events a batch can be stored, in ms (they wait ≤ 5 ms to be sent). */
const STORE_SLACK_MS = 1000;

/** What a long query may be told by its caller: stop (its request was cancelled), and how far it got. */
export interface QueryWatch {
  /** Stops the scan between windows: the query rejects with its reason. */
  signal?: AbortSignal;
  /** Told after each window: batches read, of the most this page reads. */
  progress?: (read: number, budget: number) => void;
}

/** Runs a query over a stream of batches. */
export async function queryBatches(
  source: BatchSource,
  q: TraceQuery,
  watch: QueryWatch = {},
): Promise<TraceQueryReply> {
  const f = filterOf(q);
  const limit = limitOf(q);
  const bounds = await source.bounds();
  // An empty stream says first 0, last 0; sequence 0 is no message and cannot be read.
  if (bounds.messages === 0) return page([], limit, 0, undefined);
  const cursor = parseCursor(q.cursor);
  let top = Math.min(bounds.last, cursor?.seq ?? bounds.last);
  const seqs = q.traceId === undefined ? undefined : await traceBatches(source, q.traceId, bounds, top);
  // A trace's few batches are filtered by time as they are read; a scan starts at `until`.
  if (seqs === undefined && f.untilMs !== undefined && top >= bounds.first)
    top = await lastStoredBefore(source, bounds.first, top, f.untilMs + STORE_SLACK_MS);
  const found: { seq: number; index: number; event: CallEvent }[] = [];
  let next = seqs === undefined ? top : Number.POSITIVE_INFINITY;
  let read = 0;
  let position = 0;
  const candidates = () =>
    seqs === undefined ? seqRange(next, bounds.first, WINDOW) : seqs.slice(position, position + WINDOW);
  for (let window = candidates(); window.length > 0 && found.length <= limit; window = candidates()) {
    if (read >= (seqs === undefined ? SCAN_BUDGET : TRACE_BUDGET))
      return page(found, limit, bounds.messages, `${next}.${Number.MAX_SAFE_INTEGER}`);
    const batches = await Promise.all(window.map((seq) => source.batch(seq)));
    read += window.length;
    position += window.length;
    if (watch.signal?.aborted) throw watch.signal.reason;
    watch.progress?.(read, seqs === undefined ? SCAN_BUDGET : TRACE_BUDGET);
    let older = false;
    for (const batch of batches) {
      if (batch === null) continue;
      next = batch.seq - 1;
      if (f.sinceMs !== undefined && batch.time < f.sinceMs) older = true;
      const from = cursor !== undefined && batch.seq === cursor.seq ? cursor.index - 1 : batch.events.length - 1;
      for (let i = Math.min(from, batch.events.length - 1); i >= 0; i--) {
        const e = batch.events[i];
        if (e !== undefined && matches(e, f)) found.push({ seq: batch.seq, index: i, event: e });
      }
    }
    next = (window[window.length - 1] as number) - 1;
    if (older) break;
  }
  const last = found[limit - 1];
  return page(
    found,
    limit,
    bounds.messages,
    found.length > limit && last !== undefined ? `${last.seq}.${last.index}` : undefined,
  );
}

function page(found: { event: CallEvent }[], limit: number, kept: number, next: string | undefined): TraceQueryReply {
  const reply: TraceQueryReply = { events: found.slice(0, limit).map((m) => m.event), matched: found.length, kept };
  if (next !== undefined) reply.next = next;
  return reply;
}

/**
 * The newest batches that may hold a trace's events, none above `top`, newest first: every one
 * past the index's ack floor, then those the index names below it; one more than a page reads
 * (so a page that stops at its budget knows to hand back a cursor). Each page asks again, from
 * its cursor down, so batches indexed between two pages are found in the index. The floor is
 * read before the index: a batch is acknowledged only once its entries are stored, so each one
 * at or below that floor is in the index read after it.
 */
async function traceBatches(
  source: BatchSource,
  traceId: string,
  bounds: StreamBounds,
  top: number,
): Promise<number[]> {
  const floor = await source.indexedThrough();
  const indexed = await source.batchesOf(traceId);
  const lowest = Math.max(floor + 1, bounds.first);
  const unindexed = seqRange(Math.min(top, bounds.last), lowest, TRACE_BUDGET + 1);
  const below = [...new Set(indexed)].filter((s) => s < lowest && s <= top && s >= bounds.first).sort((a, b) => b - a);
  return [...unindexed, ...below].slice(0, TRACE_BUDGET + 1);
}

/** Up to `count` sequences from `from` down to `floor`. */
function seqRange(from: number, floor: number, count: number): number[] {
  const seqs: number[] = [];
  for (let s = from; s >= floor && seqs.length < count; s--) seqs.push(s);
  return seqs;
}

/** The newest sequence in [first, top] stored before `beforeMs` (first - 1 when none), by bisection. */
async function lastStoredBefore(source: BatchSource, first: number, top: number, beforeMs: number): Promise<number> {
  let lo = first - 1;
  let hi = top;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi + 1) / 2);
    const batch = await source.batch(mid);
    // A batch gone from the front (aged out) is older than any bound.
    if (batch === null || batch.time < beforeMs) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** A cursor is `<seq>.<index>`: the page goes on with events older than that event. */
function parseCursor(cursor: string | undefined): { seq: number; index: number } | undefined {
  const m = cursor === undefined ? null : /^(\d+)\.(\d+)$/.exec(cursor);
  return m === null ? undefined : { seq: Number(m[1]), index: Number(m[2]) };
}

/** What `queryTrail` pages through: the trail, then its overflow stream; `AuditStream` is one. */
export interface TrailSource extends BatchSource {
  /** The stream of the events of principals past their share of the trail. */
  readonly overflow: BatchSource;
}

/** Cursors of pages of the overflow stream start with this. */
export const OVERFLOW_CURSOR = 'o';

/**
 * A page of the trail, then of its overflow stream (the events of principals past their share):
 * the trail's pages first, newest first, then the overflow's; a cursor of the overflow starts `o`.
 */
export async function queryTrail(trail: TrailSource, q: TraceQuery, watch: QueryWatch): Promise<TraceQueryReply> {
  if (q.cursor?.startsWith(OVERFLOW_CURSOR)) return overflowPage(trail, q, q.cursor.slice(1), watch);
  const main = await queryBatches(trail, q, watch);
  const limit = limitOf(q);
  if (main.next !== undefined) return main;
  if (main.events.length >= limit) {
    if ((await trail.overflow.bounds()).messages > 0) main.next = OVERFLOW_CURSOR;
    return main;
  }
  const rest = await overflowPage(trail, { ...q, limit: limit - main.events.length }, undefined, watch);
  const reply: TraceQueryReply = {
    events: main.events.concat(rest.events),
    matched: main.matched + rest.matched,
    kept: main.kept + rest.kept,
  };
  if (rest.next !== undefined) reply.next = rest.next;
  return reply;
}

/** A page of the overflow stream from `cursor` (its own, without the `o`; none or empty: its newest). */
async function overflowPage(
  trail: TrailSource,
  q: TraceQuery,
  cursor: string | undefined,
  watch: QueryWatch,
): Promise<TraceQueryReply> {
  const page = await queryBatches(
    trail.overflow,
    cursor === undefined || cursor === '' ? { ...q, cursor: undefined } : { ...q, cursor },
    watch,
  );
  if (page.next !== undefined) page.next = OVERFLOW_CURSOR + page.next;
  return page;
}
