/**
 * The context of a request: what it carries besides its body (PROTOCOL section 3), read from
 * every request and passed on to every downstream call (as headers: `headers.ts`), its trace
 * and deadline, and what an op handler gets besides its body (PROTOCOL 10, `RequestContext`):
 * that context, a way to report progress onto the request's reply subject before the reply, and
 * an `AbortSignal` that fires on `<mount>.$cancel {callId}` for this request's `Matrix-Call-Id`
 * or at its deadline.
 */
import { randomFillSync } from 'node:crypto';
import type { Msg, NatsConnection } from '@nats-io/nats-core';
import { Encoding, encodeBody, JSON_CONTENT_TYPE } from './codec.js';
import { TimeoutError } from './errors.js';
import { Header, OutgoingHeaders, TRACEPARENT } from './headers.js';

/** What a request carries besides its body; every field optional. */
export interface CallContext {
  /** W3C trace context (`00-<trace id>-<span id>-<flags>`). */
  traceparent?: string;
  /** Absolute Unix time in ms after which the caller no longer waits. */
  deadline?: number;
  /** The calling session's id. */
  session?: string;
  /** Who acts: an agent, user or service id. */
  principal?: string;
  /**
   * A signed session grant (PROTOCOL 3.1): sent to the dispatcher and the registry, never to
   * a target.
   */
  grant?: string;
  /**
   * Other sessions the caller's grant lets it read, comma-separated (set downstream from a
   * verified grant).
   */
  readSessions?: string;
  /**
   * The id of one dispatcher→target request (`Matrix-Call-Id`, PROTOCOL 10): what a
   * `<target>.$cancel {callId}` names. Set by the dispatcher, never passed further down.
   */
  callId?: string;
}

/** The trace id of a `traceparent`, or undefined when it is not W3C-shaped. */
export function traceIdOf(traceparent: string | undefined): string | undefined {
  if (traceparent === undefined) return undefined;
  return TRACEPARENT.exec(traceparent)?.[1];
}

// Random bytes are drawn 4 KiB at a time and made hex at once: one syscall and one encoding per
// 170 trace ids, each then two slices of a flat string (hex of 24 bytes a call cost ~0.1 µs more).
const POOL_SIZE = 4096;
const pool = Buffer.alloc(POOL_SIZE);
let poolHex = '';
let hexOffset = 0;

/** A fresh sampled `traceparent` (a new random trace id and span id). */
export function newTraceparent(): string {
  if (hexOffset + 48 > poolHex.length) {
    randomFillSync(pool);
    poolHex = pool.toString('hex');
    hexOffset = 0;
  }
  const at = hexOffset;
  hexOffset += 48;
  return `00-${poolHex.slice(at, at + 32)}-${poolHex.slice(at + 32, at + 48)}-01`;
}

/** The earlier of a relative timeout and an absolute deadline, as an absolute deadline. */
export function deadlineOf(timeoutMs: number, callerDeadline: number | undefined, now = Date.now()): number {
  const own = now + timeoutMs;
  return callerDeadline === undefined ? own : Math.min(own, callerDeadline);
}

/*
 * The op's context. Built field by field, one shape for every request; the signal, its
 * controller and its deadline timer exist only once a handler asks for `signal`.
 */

/** One progress report (PROTOCOL 10): how far, of how much, and a line on what is going on. */
export interface Progress {
  /** Work done so far, in the target's own units; grows from report to report. */
  progress: number;
  /** The whole of the work in the same units, when known. */
  total?: number;
  /** One line on what is being done. */
  message?: string;
}

/** Why a request's signal fired: a `$cancel` for its call id, or its deadline. */
export class CancelledError extends Error {
  override name = 'CancelledError';
}

/** What an op handler knows of its request besides the body. */
export interface OpContext extends CallContext {
  /** The mount answering. */
  mount: string;
  /** The op being answered, e.g. `$resolve`. */
  op: string;
  /** The encoding of the request, which the reply will use too. */
  encoding: Encoding;
  /** The caller sent `Matrix-Progress: 1`: it takes progress reports (a mount that relays them need not build any otherwise). */
  wantsProgress: boolean;
  /**
   * Fires when the dispatcher cancels this request (`<mount>.$cancel {callId}`) or its deadline
   * passes; its `reason` says which. A handler that works long should stop when it fires.
   */
  readonly signal: AbortSignal;
  /**
   * Reports progress to the caller (a message with `Matrix-Progress: 1` on the reply subject).
   * Does nothing after the reply, or for a request that is a publish.
   */
  progress(progress: number, total?: number, message?: string): void;
}

/** The context of one request a mount answers; `settle()` once it is answered. */
export class RequestContext implements OpContext {
  traceparent: string | undefined;
  deadline: number | undefined;
  session: string | undefined;
  principal: string | undefined;
  grant: string | undefined;
  readSessions: string | undefined;
  callId: string | undefined;
  private controller: AbortController | undefined = undefined;
  private timer: NodeJS.Timeout | undefined = undefined;
  private settled = false;

  constructor(
    read: CallContext,
    readonly mount: string,
    readonly op: string,
    readonly encoding: Encoding,
    readonly wantsProgress: boolean,
    private readonly nc: NatsConnection,
    private readonly msg: Msg,
  ) {
    this.traceparent = read.traceparent;
    this.deadline = read.deadline;
    this.session = read.session;
    this.principal = read.principal;
    this.grant = read.grant;
    this.readSessions = read.readSessions;
    this.callId = read.callId;
  }

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      const deadline = this.deadline;
      if (deadline !== undefined && !this.settled) {
        const ms = deadline - Date.now();
        if (ms <= 0) this.abortFor('deadline');
        else {
          this.timer = setTimeout(() => this.abortFor('deadline'), ms);
          this.timer.unref();
        }
      }
    }
    return this.controller.signal;
  }

  progress(progress: number, total?: number, message?: string): void {
    if (this.settled || !Number.isFinite(progress)) return;
    const body: Progress = { progress };
    if (total !== undefined && Number.isFinite(total)) body.total = total;
    if (message !== undefined) body.message = message;
    const h = new OutgoingHeaders().put(Header.Progress, '1');
    if (this.encoding === Encoding.Json) h.put(Header.ContentType, JSON_CONTENT_TYPE);
    try {
      this.nc.publish(this.msg.reply as string, encodeBody(body, this.encoding), { headers: h });
    } catch {
      // A progress report that cannot go out (a closed connection) is only a missed report.
    }
  }

  /**
   * Fires the signal for a `$cancel` of this request's call id, when the cancel comes with the
   * request's own session, principal and grant (PROTOCOL 10: "with the call's context headers"):
   * a call id seen by someone else stops nothing of another caller's. False when refused.
   */
  cancel(by: CallContext): boolean {
    if (by.session !== this.session || by.principal !== this.principal || by.grant !== this.grant) return false;
    this.abortFor('cancel');
    return true;
  }

  /** The request was answered: no more progress, no deadline timer. */
  settle(): void {
    this.settled = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private abortFor(why: 'cancel' | 'deadline'): void {
    if (this.controller === undefined) this.controller = new AbortController();
    if (this.controller.signal.aborted) return;
    this.controller.abort(
      why === 'cancel'
        ? new CancelledError(`${this.mount}.${this.op} was cancelled by its caller`)
        : new TimeoutError(`the caller's deadline passed while ${this.mount}.${this.op} worked`),
    );
  }
}
