/**
 * What a target may send onto one request's reply subject (PROTOCOL 10), and what it costs the
 * caller. Every message is counted before anything of it is read, within a bound per request (a
 * token bucket); past it the request fails with `TargetFloodError`, blaming the target. A progress
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
 * How many messages a target may send onto one request's reply subject: `burst` at once, then
 * `perSecond` (the bucket refills at that rate up to `burst`). Replies count too; only the first
 * message without `Matrix-Progress` is the reply.
 */
export interface ReportBound {
  /** Messages at once; default 1000. */
  burst: number;
  /** Messages a second after the burst; default 100. */
  perSecond: number;
}

/**
 * The default bound. Whoever listens takes at most 10 reports a second (the dispatcher's relay,
 * PROTOCOL 10) and a task keeps one a second, so 100 a second is 10× what anyone reads, and a
 * burst of 1000 lets a target report each item of a batch as it ends. What it lets through costs
 * ~1–2 ms of the event loop a second per request (a count and a header read per message), where an
 * unbounded flood took every other caller's calls from milliseconds to seconds.
 */
export const DEFAULT_REPORT_BOUND: ReportBound = { burst: 1000, perSecond: 100 };

/** What a request counted of its target's messages (fields of the request's own record, no object of their own). */
export interface Counted {
  /** Messages the bucket still lets through (fractional while it refills). */
  tokens: number;
  /** When the bucket was last refilled, in ms (`Date.now()`). */
  countedAt: number;
  /** Messages counted so far. */
  messages: number;
  /** When the request was sent, in ms. */
  sentAt: number;
}

/**
 * Counts one message of `counted`'s target at `now`; a `TargetFloodError` naming `subject`'s
 * mount once the bucket is empty, else undefined.
 */
export function overBound(
  counted: Counted,
  bound: ReportBound,
  subject: string,
  now: number,
): TargetFloodError | undefined {
  counted.messages++;
  if (take(counted, bound, now)) return undefined;
  const target = mountOf(subject);
  const seconds = ((now - counted.sentAt) / 1000).toFixed(1);
  return new TargetFloodError(
    `${target} sent ${counted.messages} messages onto the reply subject of one request to ${subject} in ${seconds} s, more than the ${bound.burst} at once and ${bound.perSecond} a second a request takes: the request was stopped`,
    { details: { target, messages: counted.messages } },
  );
}

/**
 * The progress reports all of one target's requests may send together: a flood spread over many
 * requests, each within its own bound, is bounded too. Generous for a target that reports on many
 * calls at once (the MCP host thins each call's reports to 20 a second).
 */
export const DEFAULT_TARGET_REPORT_BOUND: ReportBound = { burst: 5000, perSecond: 2000 };

/** One bucket per target mount, of the progress reports of all its requests. */
export class TargetReports {
  private readonly byTarget = new Map<string, { tokens: number; countedAt: number; reports: number }>();

  constructor(private readonly bound: ReportBound = DEFAULT_TARGET_REPORT_BOUND) {}

  /**
   * Counts one progress report onto a request to `subject` at `now`; a `TargetFloodError` naming
   * its mount once that mount's bucket is empty (the request it came for is stopped), else undefined.
   */
  count(subject: string, now: number): TargetFloodError | undefined {
    const target = mountOf(subject);
    let bucket = this.byTarget.get(target);
    if (bucket === undefined) {
      bucket = { tokens: this.bound.burst, countedAt: now, reports: 0 };
      this.byTarget.set(target, bucket);
    }
    bucket.reports++;
    if (take(bucket, this.bound, now)) return undefined;
    return new TargetFloodError(
      `${target} sent more progress reports onto its requests' reply subjects than the ${this.bound.burst} at once and ${this.bound.perSecond} a second all its requests take together (${bucket.reports} so far): this request was stopped`,
      { details: { target, messages: bucket.reports } },
    );
  }
}

/** Takes one token from a bucket refilled at `bound.perSecond` up to `bound.burst`; false when it is empty. */
function take(bucket: { tokens: number; countedAt: number }, bound: ReportBound, now: number): boolean {
  const refill = ((now - bucket.countedAt) * bound.perSecond) / 1000;
  bucket.countedAt = now;
  bucket.tokens = Math.min(bound.burst, bucket.tokens + refill);
  if (bucket.tokens < 1) return false;
  bucket.tokens -= 1;
  return true;
}

/** The mount of a request subject (`<mount>.<op>`). */
function mountOf(subject: string): string {
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
