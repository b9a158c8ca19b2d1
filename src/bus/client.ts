/**
 * Calls ops on mounts. One reply subscription for all requests (a muxed inbox) and one
 * timer sweep for all deadlines, so a request costs a publish and a map entry, not a
 * subscription and a timer. NATS failures come back as the protocol's typed errors:
 * no responders → `NoRespondersError` (an `UnavailableError`), no answer by the deadline →
 * `TimeoutError`, an error reply → the error class of its code (a mount's own 503 is an
 * `UnavailableError`, not `NoRespondersError`: it got the request), a reply nothing can
 * decode → `InternalError`.
 */

import { randomFillSync } from 'node:crypto';
import {
  createInbox,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  PermissionViolationError,
  type Subscription,
} from '@nats-io/nats-core';
import { decodeReply, Encoding, encodeBody, JSON_CONTENT_TYPE } from './codec.js';
import { type CallContext, CancelledError, type Progress } from './context.js';
import {
  codeOfStatus,
  type ErrorDetails,
  errorFromWire,
  ForbiddenError,
  InternalError,
  isErrorCode,
  type MatrixError,
  NoRespondersError,
  PayloadTooLargeError,
  TimeoutError,
  UnavailableError,
  UnsendableRequestError,
} from './errors.js';
import { deadlineOf, Header, putHeader, type ReplyHeaders, replyHeadersOf, writeContext } from './headers.js';
import { type Logger, silentLogger } from './log.js';
import { guarded, opSubject } from './subjects.js';

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
   * Stops waiting when it fires: the request rejects with `CancelledError` (the target is not
   * told here).
   */
  signal?: AbortSignal;
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
}

/** A reply as it came: body decoded, headers kept. */
export interface RawReply {
  value: unknown;
  headers: MsgHdrs | undefined;
  bytes: number;
}

interface Pending {
  resolve(reply: unknown): void;
  raw: boolean;
  reject(err: Error): void;
  deadline: number;
  subject: string;
  onProgress: ((progress: Progress) => void) | undefined;
  /** Whether an unreadable progress report of this request was logged already. */
  warned: boolean;
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
  private readonly logger: Logger;

  constructor(
    readonly nc: NatsConnection,
    options: BusClientOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.sweepMs = options.sweepMs ?? 5;
    this.logger = options.logger ?? silentLogger;
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
    return new Promise<unknown>((resolve, reject) => {
      this.pending.set(token, {
        resolve,
        reject,
        deadline,
        subject,
        raw,
        onProgress: options.onProgress,
        warned: false,
      });
      if (signal !== undefined) this.stopOnAbort(signal, token);
      try {
        this.ensureSubscribed();
        this.nc.publish(subject, message.data, { reply: this.inbox + token, headers: message.headers });
      } catch (err) {
        this.pending.delete(token);
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
      this.pending.delete(token);
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
    for (const [token, p] of this.pending) {
      this.pending.delete(token);
      p.reject(new UnavailableError(`client closed before ${p.subject} answered`));
    }
    this.sub?.unsubscribe();
    this.sub = undefined;
    if (this.sweeper !== undefined) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  /** Requests waiting for a reply. */
  get inFlight(): number {
    return this.pending.size;
  }

  private ensureSubscribed(): void {
    if (this.sub !== undefined && !this.sub.isClosed()) return;
    this.sub = this.nc.subscribe(`${this.inbox}*`, {
      callback: guarded((err, msg) => {
        if (err === null) this.onReply(msg);
      }),
    });
    this.nc.closed().then(
      () => this.close(),
      () => this.close(),
    );
    void this.watchPermissions();
  }

  /**
   * A publish the server's permissions refuse never gets a reply; the server says so on the
   * connection's status. Requests to that subject fail at once with `ForbiddenError`.
   */
  private async watchPermissions(): Promise<void> {
    if (this.watchingPermissions) return;
    this.watchingPermissions = true;
    for await (const status of this.nc.status()) {
      const err = status.type === 'error' ? status.error : undefined;
      if (!(err instanceof PermissionViolationError)) continue;
      // No reply can come back when this user may not receive on the inbox: every request fails.
      const inboxRefused = err.operation === 'subscription' && err.subject === `${this.inbox}*`;
      if (!inboxRefused && err.operation !== 'publish') continue;
      for (const [token, p] of this.pending) {
        if (inboxRefused) {
          this.pending.delete(token);
          p.reject(
            new ForbiddenError(
              `not permitted to receive replies on ${err.subject}: set NATS_INBOX_PREFIX / --inbox-prefix to the inbox prefix this NATS user may subscribe to`,
            ),
          );
          continue;
        }
        if (p.subject !== err.subject) continue;
        this.pending.delete(token);
        p.reject(
          new ForbiddenError(`not permitted to publish to ${err.subject}: the NATS account's permissions deny it`),
        );
      }
    }
  }

  private onReply(msg: Msg): void {
    const token = msg.subject.slice(this.inbox.length);
    const p = this.pending.get(token);
    if (p === undefined) return; // late reply to a request that already timed out
    const h = replyHeadersOf(msg);
    if (h?.progress === true) {
      this.onProgressReport(msg, h, p);
      return;
    }
    this.pending.delete(token);
    try {
      const value = readReply(msg, h, p.subject);
      p.resolve(p.raw ? { value, headers: msg.headers, bytes: msg.data.length } : value);
    } catch (err) {
      p.reject(err as MatrixError);
    }
  }

  /**
   * A progress report: to the request's listener when it is a map with a numeric `progress`; else
   * logged once and dropped.
   */
  private onProgressReport(msg: Msg, h: ReplyHeaders, p: Pending): void {
    if (p.onProgress === undefined) return;
    let report: Progress | undefined;
    try {
      report = progressOf(decodeReply(msg.data, h.contentType));
    } catch {
      report = undefined;
    }
    if (report !== undefined) {
      p.onProgress(report);
      return;
    }
    if (p.warned) return;
    p.warned = true;
    this.logger.error('progress report ignored: not a map with a numeric progress', {
      subject: p.subject,
      bytes: msg.data.length,
    });
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
        this.pending.delete(token);
        p.reject(new TimeoutError(`${p.subject} did not answer before the deadline`));
      }
    }
  }
}

/**
 * A reply as PROTOCOL section 2 says to read one: no responders first (nobody got the request),
 * then the error headers (whatever the body holds), then the body by its `Content-Type`, else
 * MessagePack, else JSON. Throws the reply's `MatrixError`; a body nothing decodes is the
 * sender's fault, an `InternalError`, never the caller's bad request.
 */
function readReply(msg: Msg, h: ReplyHeaders | undefined, subject: string): unknown {
  const status = h?.serviceErrorCode;
  if (h !== undefined && h.code === 503 && !status && msg.data.length === 0) {
    throw new NoRespondersError(`no responders for ${subject}: nothing serves that op`);
  }
  const contentType = h?.contentType;
  if (status) return throwWireError(status, h?.serviceError ?? '', decodeErrorBody(msg.data, contentType), subject);
  try {
    return decodeReply(msg.data, contentType);
  } catch (err) {
    throw new InternalError(`${subject} answered with a body that cannot be read: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/**
 * The body of an error reply, when it decodes at all: micro services put anything there,
 * or nothing.
 */
function decodeErrorBody(data: Uint8Array, contentType: string | undefined): unknown {
  try {
    return decodeReply(data, contentType);
  } catch {
    return undefined;
  }
}

/**
 * Throws the typed error of an error reply: code and message from `{error}` when the body has them,
 * else from the headers.
 */
function throwWireError(status: string, headerMessage: string, body: unknown, subject: string): never {
  const error = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined)?.error;
  const code = isErrorCode(error?.code) ? error.code : codeOfStatus(Number(status));
  const message =
    typeof error?.message === 'string' ? error.message : headerMessage || `${subject} failed with ${status}`;
  const details =
    error?.details !== null && typeof error?.details === 'object' ? (error.details as ErrorDetails) : undefined;
  throw errorFromWire(code, message, details);
}

function cancelled(subject: string): CancelledError {
  return new CancelledError(`the request to ${subject} was cancelled before it was answered`);
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

/**
 * 96 random bits as 16 base64url characters, from the same pool as reply tokens: an id that costs
 * no syscall.
 */
export function randomId(): string {
  return randomBase64url(12);
}

/** A `Matrix-Call-Id` of one request to a target (PROTOCOL 10): 96 random bits, 16 base64url characters. */
export function newCallId(): string {
  return randomId();
}

/** Random bytes, refilled a few KiB at a time: a reply token costs no syscall. */
const randomPool = Buffer.alloc(4096);
let randomAt = randomPool.length;

/**
 * A reply token: 48 random bits as 8 base64url characters, so a token seen on the wire tells
 * nothing of the next one (with counter tokens, one sniffed reply subject would let a caller aim
 * forged replies at the requests that follow it). A counter and 10 base-36 digits would be 4+
 * characters longer on every request and reply subject.
 */
export function randomToken(): string {
  return randomBase64url(6);
}

/** `bytes` random bytes of the pool as base64url. */
function randomBase64url(bytes: number): string {
  if (randomAt + bytes > randomPool.length) {
    randomFillSync(randomPool);
    randomAt = 0;
  }
  const text = randomPool.toString('base64url', randomAt, randomAt + bytes);
  randomAt += bytes;
  return text;
}
