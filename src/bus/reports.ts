/**
 * What a target may send onto one request's reply subject (PROTOCOL 10), and what it costs the
 * caller. Every message is counted, and its bytes too, before anything of it is read, within a
 * bound per request (two token buckets: messages and bytes); past it the request fails with
 * `TargetFloodError`, blaming the target. A count alone let 900 reports of 1 MB each onto a call
 * (gigabytes read, the service's connection to targets cut as a slow consumer). A progress
 * report is decoded only when someone listens, and then at most once per `everyMs`: a report
 * within the interval is kept as it came (undecoded) and replaced by any later one, and the
 * latest is decoded when the interval has passed or before the reply. So a flood costs a count
 * per message, and nobody's listener more than its interval allows.
 */
import type { Msg } from '@nats-io/nats-core';
import { decodeReply } from './codec.js';
import type { Progress } from './context.js';
import { TargetFloodError } from './errors.js';
import type { Logger } from './log.js';

/**
 * How much a target may send onto one request's reply subject: `burst` messages at once, then
 * `perSecond` (the bucket refills at that rate up to `burst`), and `bytes` at once, then
 * `bytesPerSecond` (a message's bytes are its subject, reply, headers and body as NATS framed
 * them). Replies count too; only the first message without `Matrix-Progress` is the reply.
 */
export interface ReportBound {
  /** Messages at once; default 1000. */
  burst: number;
  /** Messages a second after the burst; default 100. */
  perSecond: number;
  /**
   * Bytes at once; default 4 MiB (per target: 16 MiB). A request's is never below twice the
   * server's max_payload, so a reply of max_payload always fits.
   */
  bytes?: number;
  /** Bytes a second after the burst; default 64 KiB (per target: 4 MiB). */
  bytesPerSecond?: number;
}

/**
 * The default bound. Whoever listens takes at most 10 reports a second (the dispatcher's relay,
 * PROTOCOL 10) and a task keeps one a second, so 100 a second is 10× what anyone reads, and a
 * burst of 1000 lets a target report each item of a batch as it ends. What it lets through costs
 * ~1–2 ms of the event loop a second per request (a count and a header read per message), where an
 * unbounded flood took every other caller's calls from milliseconds to seconds.
 */
export const DEFAULT_REPORT_BOUND: Required<ReportBound> = {
  burst: 1000,
  perSecond: 100,
  // An honest report is a few hundred bytes: 1000 of them are ~0.3 MB, 100 a second ~30 KB. 4 MiB
  // holds those with room for a reply of the server's max_payload (1 MiB by default).
  bytes: 4 * 2 ** 20,
  bytesPerSecond: 64 * 2 ** 10,
};

/** What a request counted of its target's messages (fields of the request's own record, no object of their own). */
export interface Counted {
  /** Messages the bucket still lets through (fractional while it refills). */
  tokens: number;
  /** When the bucket was last refilled, in ms (`Date.now()`). */
  countedAt: number;
  /** Messages counted so far. */
  messages: number;
  /** Bytes the bucket still lets through. */
  byteTokens: number;
  /** Bytes counted so far. */
  bytes: number;
  /** When the request was sent, in ms. */
  sentAt: number;
}

/**
 * Counts one message of `size` bytes of `counted`'s target at `now`; a `TargetFloodError` naming
 * `subject`'s mount once either bucket is empty, else undefined. `bytes` is the request's byte
 * burst (`bound.bytes`, or more when the server's max_payload asks for it).
 */
export function overBound(
  counted: Counted,
  bound: Required<ReportBound>,
  bytes: number,
  subject: string,
  size: number,
  now: number,
): TargetFloodError | undefined {
  counted.messages++;
  counted.bytes += size;
  const elapsed = now - counted.countedAt;
  const counts = take(counted, bound, now);
  const fits = takeBytes(counted, bytes, bound.bytesPerSecond, elapsed, size);
  if (counts && fits) return undefined;
  const target = mountOf(subject);
  const seconds = ((now - counted.sentAt) / 1000).toFixed(1);
  const what = counts
    ? `${mib(counted.bytes)} MiB in ${counted.messages} messages onto the reply subject of one request to ${subject} in ${seconds} s, more than the ${mib(bytes)} MiB at once and ${kib(bound.bytesPerSecond)} KiB a second a request takes`
    : `${counted.messages} messages onto the reply subject of one request to ${subject} in ${seconds} s, more than the ${bound.burst} at once and ${bound.perSecond} a second a request takes`;
  return new TargetFloodError(`${target} sent ${what}: the request was stopped`, {
    details: { target, messages: counted.messages, bytes: counted.bytes },
  });
}

/** Takes `size` bytes from a byte bucket refilled at `perSecond` up to `burst` over `elapsed` ms; false when they do not fit. */
function takeBytes(
  bucket: { byteTokens: number },
  burst: number,
  perSecond: number,
  elapsed: number,
  size: number,
): boolean {
  bucket.byteTokens = Math.min(burst, bucket.byteTokens + (elapsed * perSecond) / 1000);
  if (bucket.byteTokens < size) return false;
  bucket.byteTokens -= size;
  return true;
}

function mib(bytes: number): string {
  return (bytes / 2 ** 20).toFixed(1);
}

function kib(bytes: number): string {
  return (bytes / 2 ** 10).toFixed(0);
}

/**
 * The progress reports all of one target's requests may send together: a flood spread over many
 * requests, each within its own bound, is bounded too. Generous for a target that reports on many
 * calls at once (the MCP host thins each call's reports to 20 a second): 2000 reports of ~300
 * bytes a second are ~0.6 MB. The count (not the bytes) grows with the target's requests in
 * flight, a quarter of one request's bound each: how many requests a target has is up to its
 * callers (one principal may keep 256 in flight), and 240 calls asking progress of a target
 * reporting 20 a second each (4,800 a second) must not make it a flooder.
 */
export const DEFAULT_TARGET_REPORT_BOUND: Required<ReportBound> = {
  burst: 5000,
  perSecond: 2000,
  bytes: 16 * 2 ** 20,
  bytesPerSecond: 4 * 2 ** 20,
};

/** A target's bucket: its reports' count, and their bytes (and its replies' past their estimate). */
interface TargetBucket {
  tokens: number;
  countedAt: number;
  reports: number;
  byteTokens: number;
  bytes: number;
}

/** One bucket per target mount, of the progress reports of all its requests. */
export class TargetReports {
  private readonly byTarget = new Map<string, TargetBucket>();
  /** Requests in flight per target mount. */
  private readonly inFlight = new Map<string, number>();

  private readonly bound: Required<ReportBound>;

  /**
   * @param bound the target's bound (`DEFAULT_TARGET_REPORT_BOUND` by default).
   * @param perRequest one request's bound: a quarter of its count is added to the target's per request in flight.
   */
  constructor(
    bound?: ReportBound,
    private readonly perRequest: Required<ReportBound> = DEFAULT_REPORT_BOUND,
  ) {
    this.bound = { ...DEFAULT_TARGET_REPORT_BOUND, ...bound };
  }

  /** A request to `subject` is in flight. */
  opened(subject: string): void {
    const target = mountOf(subject);
    this.inFlight.set(target, (this.inFlight.get(target) ?? 0) + 1);
  }

  /** A request to `subject` ended. */
  closed(subject: string): void {
    const target = mountOf(subject);
    const left = (this.inFlight.get(target) ?? 1) - 1;
    if (left <= 0) this.inFlight.delete(target);
    else this.inFlight.set(target, left);
  }

  /**
   * Counts one progress report of `size` bytes onto a request to `subject` at `now`; a
   * `TargetFloodError` naming its mount once that mount's bucket is empty (every request to it is
   * then stopped), else undefined.
   */
  count(subject: string, size: number, now: number): TargetFloodError | undefined {
    const target = mountOf(subject);
    const requests = this.inFlight.get(target) ?? 0;
    const bound = this.countBound(requests);
    const bucket = this.bucketOf(target, bound, now);
    bucket.reports++;
    bucket.bytes += size;
    const elapsed = now - bucket.countedAt;
    const counts = take(bucket, bound, now);
    if (takeBytes(bucket, this.bound.bytes, this.bound.bytesPerSecond, elapsed, size) && counts) return undefined;
    return new TargetFloodError(
      `${target} sent more progress reports onto its requests' reply subjects than the ${Math.round(bound.burst)} (${mib(this.bound.bytes)} MiB) at once and ${Math.round(bound.perSecond)} (${mib(this.bound.bytesPerSecond)} MiB) a second all its requests take together (${requests} in flight; ${bucket.reports}, ${mib(bucket.bytes)} MiB so far): its requests were stopped`,
      { details: { target, messages: bucket.reports, bytes: bucket.bytes } },
    );
  }

  /**
   * Counts `excess` bytes of a reply onto a request to `subject` at `now`, past what the reply was
   * taken to be, into its mount's bucket of bytes (its reports'); a `TargetFloodError` naming the
   * mount once that bucket is empty (every request to it is then stopped), else undefined.
   */
  countReply(subject: string, excess: number, now: number): TargetFloodError | undefined {
    const target = mountOf(subject);
    const bound = this.countBound(this.inFlight.get(target) ?? 0);
    const bucket = this.bucketOf(target, bound, now);
    bucket.bytes += excess;
    const elapsed = now - bucket.countedAt;
    // The count refills to now, none taken: a reply is no report.
    take(bucket, bound, now, 0);
    if (takeBytes(bucket, this.bound.bytes, this.bound.bytesPerSecond, elapsed, excess)) return undefined;
    return new TargetFloodError(
      `${target} answered its requests with replies larger than it had been answering, past the ${mib(this.bound.bytes)} MiB at once and ${mib(this.bound.bytesPerSecond)} MiB a second all its requests take together (${mib(bucket.bytes)} MiB so far): its requests were stopped`,
      { details: { target, messages: bucket.reports, bytes: bucket.bytes } },
    );
  }

  /** The count's bound: the target's, or a quarter of one request's per request in flight when more. */
  private countBound(requests: number): { burst: number; perSecond: number } {
    return {
      burst: Math.max(this.bound.burst, (requests * this.perRequest.burst) / 4),
      perSecond: Math.max(this.bound.perSecond, (requests * this.perRequest.perSecond) / 4),
    };
  }

  private bucketOf(target: string, bound: { burst: number }, now: number): TargetBucket {
    let bucket = this.byTarget.get(target);
    if (bucket === undefined) {
      bucket = { tokens: bound.burst, countedAt: now, reports: 0, byteTokens: this.bound.bytes, bytes: 0 };
      this.byTarget.set(target, bucket);
    }
    return bucket;
  }
}

/** Takes `tokens` (default one) from a bucket refilled at `bound.perSecond` up to `bound.burst`; false when they are not there. */
function take(
  bucket: { tokens: number; countedAt: number },
  bound: { burst: number; perSecond: number },
  now: number,
  tokens = 1,
): boolean {
  const refill = ((now - bucket.countedAt) * bound.perSecond) / 1000;
  bucket.countedAt = now;
  bucket.tokens = Math.min(bound.burst, bucket.tokens + refill);
  if (bucket.tokens < tokens) return false;
  bucket.tokens -= tokens;
  return true;
}

/** The mount of a request subject (`<mount>.<op>`). */
export function mountOf(subject: string): string {
  return subject.slice(0, subject.lastIndexOf('.'));
}

/**
 * A request's progress listener, thinned: reports decoded and passed at most once per `everyMs`,
 * the latest held back undecoded meanwhile.
 */
export class ProgressFeed {
  private passedAt = 0;
  private held: Msg | undefined;
  private heldType: string | undefined;
  /** Whether an unreadable report was logged already (once per request). */
  private warned = false;

  constructor(
    private readonly listener: (progress: Progress) => void,
    private readonly everyMs: number,
    private readonly subject: string,
    private readonly logger: Logger,
  ) {}

  /** A report as it came: passed on now, or held until the interval has passed. */
  report(msg: Msg, contentType: string | undefined, now: number): void {
    if (now - this.passedAt < this.everyMs) {
      this.held = msg;
      this.heldType = contentType;
      return;
    }
    this.held = undefined;
    this.pass(msg, contentType, now);
  }

  /** Passes the report held back when its interval has passed (or at once with `force`: before the reply). */
  flush(now: number, force = false): void {
    const msg = this.held;
    if (msg === undefined || (!force && now - this.passedAt < this.everyMs)) return;
    this.held = undefined;
    this.pass(msg, this.heldType, now);
  }

  private pass(msg: Msg, contentType: string | undefined, now: number): void {
    this.passedAt = now;
    let report: Progress | undefined;
    try {
      report = progressOf(decodeReply(msg.data, contentType));
    } catch {
      report = undefined;
    }
    if (report !== undefined) {
      this.listener(report);
      return;
    }
    if (this.warned) return;
    this.warned = true;
    this.logger.error('progress report ignored: not a map with a numeric progress', {
      subject: this.subject,
      bytes: msg.data.length,
    });
  }
}

/**
 * A progress report as PROTOCOL 10 shapes it, or undefined: `{progress: number, total?: number,
 * message?: string}`.
 */
function progressOf(body: unknown): Progress | undefined {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return undefined;
  const { progress, total, message } = body as Record<string, unknown>;
  if (typeof progress !== 'number' || !Number.isFinite(progress)) return undefined;
  const report: Progress = { progress };
  if (typeof total === 'number' && Number.isFinite(total)) report.total = total;
  if (typeof message === 'string') report.message = message.length > 1024 ? message.slice(0, 1024) : message;
  return report;
}
