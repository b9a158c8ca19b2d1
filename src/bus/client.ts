/**
 * Calls ops on mounts. One timer sweep for all deadlines; replies on one subscription for all
 * requests (a muxed inbox: a request costs a publish and a map entry), or, for calls to mounts
 * that may not be trusted (`replies: 'per-request'`), on a subscription of each request's own,
 * dropped when it ends, so a message sent to any other subject of the inbox has no subscriber and
 * never reaches this process. Whatever comes back is counted before it is read, within a bound
 * per request (`reports.ts`): past it the request fails with `TargetFloodError`. NATS failures come back as the protocol's typed errors:
 * no responders → `NoRespondersError` (an `UnavailableError`), no answer by the deadline →
 * `TimeoutError`, an error reply → the error class of its code (a mount's own 503 is an
 * `UnavailableError`, not `NoRespondersError`: it got the request), a reply nothing can
 * decode → `InternalError`.
 */

import {
  createInbox,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  PermissionViolationError,
  type Subscription,
} from '@nats-io/nats-core';
import { Encoding, encodeBody, JSON_CONTENT_TYPE } from './codec.js';
import { type CallContext, CancelledError, type Progress } from './context.js';
import {
  ConnectionLostError,
  ForbiddenError,
  type MatrixError,
  PayloadTooLargeError,
  type TargetFloodError,
  TimeoutError,
  UnavailableError,
  UnsendableRequestError,
} from './errors.js';
import { deadlineOf, Header, putHeader, replyHeadersOf, writeContext } from './headers.js';
import { randomToken } from './ids.js';
import { type Logger, silentLogger } from './log.js';
import { readReply } from './read-reply.js';
import {
  type Counted,
  DEFAULT_REPORT_BOUND,
  mountOf,
  overBound,
  ProgressFeed,
  type ReportBound,
  TargetReports,
} from './reports.js';
import { type Callback, guarded, opSubject } from './subjects.js';

/** How one request is made. */
export interface RequestOptions extends CallContext {
  /** How long to wait, in ms; the earlier of this and `deadline` wins. Default: the client's. */
  timeoutMs?: number;
  /** Send and receive JSON instead of MessagePack. */
  json?: boolean;
  /**
   * Told of each progress report the target sends before its reply (`Matrix-Progress: 1`,
   * PROTOCOL 10). Reports come whether or not anyone listens; they are never the reply.
   */
  onProgress?: (progress: Progress) => void;
  /**
   * Shortest time between two reports given to `onProgress`, in ms; a report within it is held
   * back undecoded, replaced by any later one, and given when the interval has passed or before
   * the reply. Default 0: each report.
   */
  progressEveryMs?: number;
  /**
   * Stops waiting when it fires: the request rejects with `CancelledError` (the target is not
   * told here).
   */
  signal?: AbortSignal;
  /**
   * Bytes the reply was taken to be when the call was let in flight (the dispatcher's reply
   * budget). What a reply sends past it is counted against its target's bucket of bytes (that of
   * its progress reports): a target that answered small to be let many calls in flight, then
   * answers them all large, is stopped before nats-server cuts the connection all targets share.
   */
  replyBytes?: number;
}

/** How a client is made. */
export interface BusClientOptions {
  /** Default wait for a reply, in ms. Default 30000. */
  timeoutMs?: number;
  /** Resolution of the deadline sweep, in ms. Default 5. */
  sweepMs?: number;
  /** Prefix of its reply subjects; default the connection's (`_INBOX`, or its `inboxPrefix`). */
  inboxPrefix?: string;
  /**
   * Where a target's unreadable progress reports are logged (once per request); default nowhere.
   */
  logger?: Logger;
  /**
   * `shared` (default): one subscription on the inbox's wildcard for every request. `per-request`:
   * each request subscribes to its own reply subject (a SUB and an UNSUB more per request), so
   * a message to any other subject of the inbox reaches nobody: for targets whose NATS users may
   * publish onto the inbox.
   */
  replies?: ReplyMode;
  /** What a target may send onto one request's reply subject; default `DEFAULT_REPORT_BOUND`. */
  reportBound?: ReportBound;
  /** The progress reports all of one target's requests may send together; default `DEFAULT_TARGET_REPORT_BOUND`. */
  targetReportBound?: ReportBound;
  /**
   * Fail every request in flight with `ConnectionLostError` as soon as the connection
   * disconnects, rather than let each wait out its deadline for a reply the cut lost. Default:
   * true with `replies: 'per-request'` (calls to targets), false otherwise.
   */
  failOnDisconnect?: boolean;
}

/** How a client receives replies (`BusClientOptions.replies`). */
export const ReplyMode = { Shared: 'shared', PerRequest: 'per-request' } as const;
export type ReplyMode = (typeof ReplyMode)[keyof typeof ReplyMode];

/** A reply as it came: body decoded, headers kept. */
export interface RawReply {
  value: unknown;
  headers: MsgHdrs | undefined;
  /** Its size as framed: subject, headers and body. */
  bytes: number;
}

interface Pending extends Counted {
  resolve(reply: unknown): void;
  raw: boolean;
  reject(err: Error): void;
  deadline: number;
  subject: string;
  /** Its listener of progress reports; undefined when nobody listens (reports are then only counted). */
  progress: ProgressFeed | undefined;
  /** Its own reply subscription (`replies: 'per-request'`). */
  sub: Subscription | undefined;
  /** Bytes its reply was taken to be (`RequestOptions.replyBytes`). */
  replyBytes: number | undefined;
}

/** A request–reply client for mounts; share one per connection. */
export class BusClient {
  private readonly inbox: string;
  private readonly pending = new Map<string, Pending>();
  private readonly timeoutMs: number;
  private readonly sweepMs: number;
  private sub: Subscription | undefined;
  private sweeper: NodeJS.Timeout | undefined;
  private watchingPermissions = false;
  private watchingClose = false;
  private readonly logger: Logger;
  private readonly perRequest: boolean;
  private readonly bound: Required<ReportBound>;
  private readonly targetReports: TargetReports;
  private readonly failOnDisconnect: boolean;
  /** The callback of every reply subscription. */
  private readonly receive: Callback = guarded((err, msg) => {
    if (err === null) this.onReply(msg);
  });

  constructor(
    readonly nc: NatsConnection,
    options: BusClientOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.sweepMs = options.sweepMs ?? 5;
    this.logger = options.logger ?? silentLogger;
    this.perRequest = options.replies === ReplyMode.PerRequest;
    this.bound = { ...DEFAULT_REPORT_BOUND, ...options.reportBound };
    this.targetReports = new TargetReports(options.targetReportBound, this.bound);
    this.failOnDisconnect = options.failOnDisconnect ?? this.perRequest;
    // The connection's inbox prefix (`_INBOX_agent`…): where NATS permissions let this user
    // receive replies.
    this.inbox = `${createInbox(options.inboxPrefix ?? (nc as { options?: { inboxPrefix?: string } }).options?.inboxPrefix)}.`;
  }

  /** Calls `<target>.<op>` with `args` and returns the decoded reply, or throws a `MatrixError`. */
  request<T = unknown>(target: string, op: string, args: unknown, options: RequestOptions = {}): Promise<T> {
    return this.send(opSubject(target, op), args, options, false) as Promise<T>;
  }

  /** Sends a request to a subject and returns the reply with its headers and size. */
  requestRaw(subject: string, args: unknown, options: RequestOptions = {}): Promise<RawReply> {
    return this.send(subject, args, options, true) as Promise<RawReply>;
  }

  /**
   * The shared path of every call: resolves with the decoded value, or the raw reply when `raw`.
   * Never throws: whatever goes wrong, before or after the publish, comes back as a rejection.
   */
  private send(subject: string, args: unknown, options: RequestOptions, raw: boolean): Promise<unknown> {
    const now = Date.now();
    const deadline = deadlineOf(options.timeoutMs ?? this.timeoutMs, options.deadline, now);
    if (deadline <= now) {
      return Promise.reject(new TimeoutError(`the deadline passed before ${subject} was called`));
    }
    let message: { data: Uint8Array; headers: MsgHdrs | undefined };
    try {
      message = this.encodeRequest(subject, args, options, deadline);
    } catch (err) {
      return Promise.reject(err);
    }
    const token = this.newToken();
    const signal = options.signal;
    if (signal?.aborted) return Promise.reject(cancelled(subject));
    const onProgress = options.onProgress;
    return new Promise<unknown>((resolve, reject) => {
      const p: Pending = {
        resolve,
        reject,
        deadline,
        subject,
        raw,
        progress:
          onProgress === undefined
            ? undefined
            : new ProgressFeed(onProgress, options.progressEveryMs ?? 0, subject, this.logger),
        sub: undefined,
        replyBytes: options.replyBytes,
        tokens: this.bound.burst,
        countedAt: now,
        messages: 0,
        byteTokens: this.byteBurst(),
        bytes: 0,
        sentAt: now,
      };
      this.pending.set(token, p);
      this.targetReports.opened(subject);
      if (signal !== undefined) this.stopOnAbort(signal, token);
      const reply = this.inbox + token;
      try {
        this.listen();
        if (this.perRequest) p.sub = this.nc.subscribe(reply, { callback: this.receive });
        this.nc.publish(subject, message.data, { reply, headers: message.headers });
      } catch (err) {
        this.drop(token, p);
        reject(new UnavailableError(`cannot send to ${subject}: ${(err as Error).message}`, { cause: err }));
        return;
      }
      this.ensureSweeping();
    });
  }

  /** Rejects the request of `token` with `CancelledError` when `signal` fires first. */
  private stopOnAbort(signal: AbortSignal, token: string): void {
    const p = this.pending.get(token);
    const onAbort = () => {
      if (this.pending.get(token) !== p || p === undefined) return;
      this.drop(token, p);
      p.reject(cancelled(p.subject));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    if (p === undefined) return;
    const { resolve, reject } = p;
    p.resolve = (reply) => {
      signal.removeEventListener('abort', onAbort);
      resolve(reply);
    };
    p.reject = (err) => {
      signal.removeEventListener('abort', onAbort);
      reject(err);
    };
  }

  /** A request's burst of bytes: the bound's, or twice the server's max_payload when that is more. */
  private byteBurst(): number {
    return Math.max(this.bound.bytes, 2 * (this.nc.info?.max_payload ?? 0));
  }

  /** A reply token no request in flight holds. */
  private newToken(): string {
    for (;;) {
      const token = randomToken();
      if (!this.pending.has(token)) return token;
    }
  }

  /**
   * The body and headers of a request; throws `UnsendableRequestError` or `PayloadTooLargeError`.
   */
  private encodeRequest(
    subject: string,
    args: unknown,
    options: RequestOptions,
    deadline: number,
  ): { data: Uint8Array; headers: MsgHdrs | undefined } {
    const encoding = options.json ? Encoding.Json : Encoding.MsgPack;
    let data: Uint8Array;
    let headers: MsgHdrs | undefined;
    try {
      data = encodeBody(args ?? {}, encoding);
      headers = writeContext(options, undefined, deadline);
      if (encoding === Encoding.Json) headers = putHeader(headers, Header.ContentType, JSON_CONTENT_TYPE);
      if (options.onProgress !== undefined) headers = putHeader(headers, Header.Progress, '1');
    } catch (err) {
      throw new UnsendableRequestError(`the request to ${subject} cannot be sent: ${(err as Error).message}`, {
        cause: err,
      });
    }
    const max = this.nc.info?.max_payload;
    if (max !== undefined && data.length > max) {
      throw new PayloadTooLargeError(
        `request to ${subject} is ${data.length} bytes, over the server's max_payload of ${max}`,
      );
    }
    return { data, headers };
  }

  /** Fails every pending request and stops listening for replies. */
  close(): void {
    this.failPending(
      () => true,
      (p) => new UnavailableError(`client closed before ${p.subject} answered`),
    );
    this.sub?.unsubscribe();
    this.sub = undefined;
    if (this.sweeper !== undefined) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  /** Requests waiting for a reply. */
  get inFlight(): number {
    return this.pending.size;
  }

  /** Listens for replies (the shared subscription), for the connection's end and for refused permissions. */
  private listen(): void {
    if (!this.watchingClose) {
      this.watchingClose = true;
      this.nc.closed().then(
        () => this.close(),
        () => this.close(),
      );
      void this.watchPermissions();
    }
    if (this.perRequest || (this.sub !== undefined && !this.sub.isClosed())) return;
    this.sub = this.nc.subscribe(`${this.inbox}*`, { callback: this.receive });
  }

  /** Ends the wait of the request of `token`: no more replies reach it. */
  private drop(token: string, p: Pending): void {
    if (this.pending.delete(token)) this.targetReports.closed(p.subject);
    p.sub?.unsubscribe();
  }

  /**
   * A publish the server's permissions refuse never gets a reply; the server says so on the
   * connection's status. Requests to that subject fail at once with `ForbiddenError`.
   */
  private async watchPermissions(): Promise<void> {
    if (this.watchingPermissions) return;
    this.watchingPermissions = true;
    for await (const status of this.nc.status()) {
      if (status.type === 'disconnect' && this.failOnDisconnect) {
        this.connectionLost();
        continue;
      }
      const err = status.type === 'error' ? status.error : undefined;
      if (!(err instanceof PermissionViolationError)) continue;
      // No reply can come back when this user may not receive on the inbox: every request fails.
      const inboxRefused = err.operation === 'subscription' && err.subject.startsWith(this.inbox);
      if (!inboxRefused && err.operation !== 'publish') continue;
      if (inboxRefused)
        this.failPending(
          () => true,
          () =>
            new ForbiddenError(
              `not permitted to receive replies on ${err.subject}: set NATS_INBOX_PREFIX / --inbox-prefix to the inbox prefix this NATS user may subscribe to`,
            ),
        );
      else
        this.failPending(
          (p) => p.subject === err.subject,
          () =>
            new ForbiddenError(`not permitted to publish to ${err.subject}: the NATS account's permissions deny it`),
        );
    }
  }

  /**
   * The connection disconnected: every reply in flight on it is lost (nats-server does not keep
   * them), so every request fails now, not at its deadline.
   */
  private connectionLost(): void {
    this.failPending(
      () => true,
      (p) =>
        new ConnectionLostError(
          `the connection to NATS was lost before ${p.subject} answered: its reply is lost, and the call may have run`,
        ),
    );
  }

  /** Ends the wait of every request in flight that `which` picks, failing it with what `why` says. */
  private failPending(which: (p: Pending) => boolean, why: (p: Pending) => MatrixError): void {
    for (const [token, p] of this.pending) {
      if (!which(p)) continue;
      this.drop(token, p);
      p.reject(why(p));
    }
  }

  /** A message onto a request's reply subject: counted first, then a progress report or the reply. */
  private onReply(msg: Msg): void {
    const token = msg.subject.slice(this.inbox.length);
    const p = this.pending.get(token);
    if (p === undefined) return; // late reply to a request that already timed out
    const now = Date.now();
    const size = sizeOf(msg);
    const flood = overBound(p, this.bound, this.byteBurst(), p.subject, size, now);
    if (flood !== undefined) {
      this.drop(token, p);
      p.reject(flood);
      return;
    }
    const h = replyHeadersOf(msg);
    if (h?.progress === true) {
      // Every report of the target's requests together is bounded too: a flood spread over many
      // calls (the count's bound grows with the requests in flight, which its callers choose).
      // Past it every request to the target stops listening at once, so nats-server stops
      // delivering what the target sends them.
      const spread = this.targetReports.count(p.subject, size, now);
      if (spread !== undefined) {
        this.stopTarget(mountOf(p.subject), spread);
        return;
      }
      // Nobody listening: counted, never decoded.
      p.progress?.report(msg, h.contentType, now);
      return;
    }
    // A reply past what it was taken to be: the excess is the target's, like its reports' bytes.
    if (p.replyBytes !== undefined && size > p.replyBytes) {
      const over = this.targetReports.countReply(p.subject, size - p.replyBytes, now);
      if (over !== undefined) {
        this.stopTarget(mountOf(p.subject), over);
        return;
      }
    }
    this.drop(token, p);
    p.progress?.flush(now, true);
    try {
      const value = readReply(msg, h, p.subject);
      // The reply's size as framed (headers too): what it took of the connection's pending bytes.
      p.resolve(p.raw ? { value, headers: msg.headers, bytes: size } : value);
    } catch (err) {
      p.reject(err as MatrixError);
    }
  }

  /** Fails every request to `target` in flight with `flood`. */
  private stopTarget(target: string, flood: TargetFloodError): void {
    this.failPending(
      (p) => mountOf(p.subject) === target,
      () => flood,
    );
  }

  private ensureSweeping(): void {
    if (this.sweeper !== undefined) return;
    this.sweeper = setInterval(() => this.sweep(), this.sweepMs);
    this.sweeper.unref();
  }

  private sweep(): void {
    if (this.pending.size === 0) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
      return;
    }
    const now = Date.now();
    for (const [token, p] of this.pending) {
      if (p.deadline <= now) {
        this.drop(token, p);
        p.reject(new TimeoutError(`${p.subject} did not answer before the deadline`));
      } else p.progress?.flush(now);
    }
  }
}

/**
 * A message's size as NATS framed it (subject, reply, headers and body), read from the frame:
 * nothing of the message decoded. nats.js's messages have `size()`; the `Msg` type does not say so.
 */
function sizeOf(msg: Msg): number {
  const framed = (msg as { size?: () => number }).size;
  return typeof framed === 'function' ? framed.call(msg) : msg.data.length;
}

function cancelled(subject: string): CancelledError {
  return new CancelledError(`the request to ${subject} was cancelled before it was answered`);
}

export { newCallId, randomId, randomToken } from './ids.js';
