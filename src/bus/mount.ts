/**
 * A mount: a named actor that answers ops by request–reply. All instances of a mount share
 * one queue group; each op is its own subject `<mount>.<op>`. The mount decodes, validates
 * against the op's contract, honours `Matrix-Deadline`, and answers every request, errors
 * included, in the encoding the request came in. `stop()` drains, then closes what the mount's
 * builder created through the `onStop` hook.
 */

import { type Msg, type NatsConnection, nuid, type Subscription } from '@nats-io/nats-core';
import { closedTopLevel, decodeMap, Encoded, Encoding, encodeBody, JSON_CONTENT_TYPE } from './codec.js';
import { type CallContext, CancelledError, type OpContext, type Progress } from './context.js';
import { type Check, type Contracts, SchemaId, contracts as sharedContracts } from './contracts.js';
import { type EndpointStats, serveDiscovery } from './discovery.js';
import {
  BadRequestError,
  InternalError,
  MatrixError,
  NotFoundError,
  PayloadTooLargeError,
  TimeoutError,
  UnavailableError,
} from './errors.js';
import { Header, OutgoingHeaders, requestHeadersOf } from './headers.js';
import { type Logger, silentLogger } from './log.js';
import { describeViolations, violationDetails } from './schema-compiler.js';
import { CANCEL_OP, guarded, isInboxSubject, mountWildcard, opSubject, queueGroup } from './subjects.js';

/** Most bytes of a `$cancel` body: `{callId}` of the longest call id (256 characters) is ~270. */
const MAX_CANCEL_BYTES = 1024;

export type { OpContext } from './context.js';

/** A schema: the `$id` of one in `contracts/`, or the schema itself. */
export type SchemaRef = string | Record<string, unknown>;

/** One op of a mount: its contract and its handler. */
export interface OpSpec<Req = never, Rep = unknown> {
  /** One line on what the op does (shown by `$introspect` and `$SRV.INFO`). */
  description: string;
  /** The request's schema: an `$id` in `contracts/`, or a JSON Schema of the service's own. */
  request: SchemaRef;
  /** The reply's schema, likewise. */
  response: SchemaRef;
  /** Answers a request that already passed its schema; throw a `MatrixError` to fail it. */
  handle(request: Req, ctx: OpContext): Rep | Promise<Rep>;
  /**
   * Requests come back byte for byte (a session's `$resolve`): each distinct short body is
   * decoded and validated once, and the handler gets the same deeply frozen object for the
   * same bytes (it must not change it).
   */
  sameBytesSameRequest?: boolean;
  /**
   * Checks the request's headers and reply subject before its body is read (a grant, where
   * trusted issuers are set, and its holder: the reply subject, and the last `Nats-Request-Info`,
   * unparsed; and the version of the nats-server the request came through, from its INFO, which
   * a reconnect renews): throwing a `MatrixError` refuses the request at the cost of one header
   * read, its body never decoded. A check that must wait (an access token whose issuer's keys are
   * asked) returns a promise; the body is read once it settles, and a rejection refuses the request.
   */
  beforeBody?: (
    ctx: CallContext,
    reply: string,
    requestInfo: string | undefined,
    server: string | undefined,
  ) => void | Promise<void>;
}

/**
 * An op of any request type, as a mount holds its ops: each declares its own, and its JSON Schema
 * checks it.
 */
// biome-ignore lint/suspicious/noExplicitAny: each op declares its own request type; the op's JSON Schema checks it
export type AnyOpSpec = OpSpec<any, unknown>;

/** How to build a mount. */
export interface MountOptions {
  /** Mount name, e.g. `system.tools`. */
  name: string;
  /** Semantic version of the implementation. */
  version: string;
  /** One line on what the mount is. */
  description: string;
  /** The ops by name (`$resolve`, …); `$introspect` is added unless given. */
  ops: Record<string, AnyOpSpec>;
  /** Extra fields for the `$introspect` reply (revision, counts, …). */
  describe?: () => Record<string, unknown>;
  /** Largest request body accepted, in bytes; default: the server's `max_payload`. */
  maxRequestBytes?: number;
  /** Contracts to validate against; default: `contracts/` of this package. */
  contracts?: Contracts;
  /** Where unexpected failures are logged; default: nowhere. */
  logger?: Logger;
  /**
   * Runs once `stop()` has answered every request taken: closes what the mount's builder
   * created for it (a dispatcher, a watch), so nothing outlives the mount.
   */
  onStop?: () => void | Promise<void>;
  /**
   * Told of a request refused before its op's handler ran (unknown op, an unreadable or invalid
   * body, a bad header, a deadline already past): the dispatcher audits such `$call`s too.
   */
  onRefused?: (request: RefusedRequest) => void;
}

/** A request a mount refused before its handler ran. */
export interface RefusedRequest {
  op: string;
  data: Uint8Array;
  traceparent: string | undefined;
  /** Its `Matrix-Grant` header, when its headers could be read. */
  grant: string | undefined;
  error: MatrixError;
}

interface BoundOp {
  spec: AnyOpSpec;
  check: Check;
  /** The only top-level keys its request may have, when its schema closes its top level. */
  knownKeys: ReadonlySet<string> | undefined;
  stats: EndpointStats;
  /** Requests read by their bytes, for ops that ask for it. */
  memo?: RequestMemo;
}

const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/**
 * A mount on a NATS connection. `start()` subscribes; `stop()` drains and waits for in-flight work.
 */
export class Mount {
  /** This instance's id (ADR-32 service id). */
  readonly id = nuid.next();
  /** When this instance started. */
  readonly startedAt = new Date();
  readonly name: string;

  private readonly ops = new Map<string, BoundOp>();
  private readonly prefixLength: number;
  /** Where unexpected failures are logged; settable until `start()`. */
  logger: Logger;
  private readonly contracts: Contracts;
  private subs: Subscription[] = [];
  private inFlight = 0;
  private idle: (() => void) | undefined;
  /** Requests being worked on that carry a `Matrix-Call-Id`, by it: what `$cancel` can reach. */
  private readonly calls = new Map<string, RequestContext>();
  /**
   * Whether this mount answers `$cancel {callId}` itself: unless its builder gave an op of
   * that name.
   */
  private readonly cancelsCalls: boolean;

  constructor(
    private readonly nc: NatsConnection,
    private readonly options: MountOptions,
  ) {
    this.name = options.name;
    this.prefixLength = options.name.length + 1;
    this.logger = options.logger ?? silentLogger;
    this.contracts = options.contracts ?? sharedContracts();
    this.cancelsCalls = !(CANCEL_OP in options.ops);
    const ops: Record<string, AnyOpSpec> = { $introspect: this.introspectOp(), ...options.ops };
    for (const [op, spec] of Object.entries(ops)) {
      this.ops.set(op, {
        spec,
        check:
          typeof spec.request === 'string' ? this.contracts.check(spec.request) : this.contracts.compile(spec.request),
        knownKeys: closedTopLevel(this.schemaOf(spec.request)),
        stats: {
          name: op.slice(1),
          subject: opSubject(options.name, op),
          queue_group: queueGroup(options.name),
          num_requests: 0,
          num_errors: 0,
          last_error: '',
          processing_time: 0,
          average_processing_time: 0,
        },
        memo: spec.sameBytesSameRequest ? new RequestMemo() : undefined,
      });
    }
  }

  /**
   * Subscribes the ops (one queue group for all instances) and discovery; resolves once the server
   * has them.
   */
  async start(): Promise<this> {
    this.subs.push(
      this.nc.subscribe(mountWildcard(this.name), {
        queue: queueGroup(this.name),
        callback: guarded((err, msg) => {
          if (err === null) this.onRequest(msg);
        }),
      }),
    );
    // Every instance hears `$cancel` (no queue group): the one working on the call answers it.
    if (this.cancelsCalls)
      this.subs.push(
        this.nc.subscribe(opSubject(this.name, CANCEL_OP), {
          callback: guarded((err, msg) => {
            if (err === null) this.onCancel(msg);
          }),
        }),
      );
    this.subs.push(
      ...serveDiscovery(this.nc, {
        mount: this.name,
        id: this.id,
        version: this.options.version,
        description: this.options.description,
        startedAt: this.startedAt,
        endpoints: () => this.endpointStats(),
      }),
    );
    await this.nc.flush();
    return this;
  }

  /** Stops taking requests, answers those already taken, runs the `onStop` hook, then resolves. */
  async stop(): Promise<void> {
    const subs = this.subs;
    this.subs = [];
    await Promise.all(subs.map((s) => (s.isClosed() ? undefined : s.drain())));
    if (this.inFlight > 0) await new Promise<void>((resolve) => (this.idle = resolve));
    await this.options.onStop?.();
  }

  /** Figures per op, as `$SRV.STATS` reports them. */
  endpointStats(): EndpointStats[] {
    return [...this.ops.values()].map((o) => ({ ...o.stats }));
  }

  private onRequest(msg: Msg): void {
    // A publish, not a request: nobody waits for an answer. A reply subject that is no inbox is
    // refused unanswered: answering it would publish with this service's rights where the
    // caller chose.
    if (!msg.reply || !isInboxSubject(msg.reply)) return;
    const started = performance.now();
    const op = msg.subject.slice(this.prefixLength);
    if (op === CANCEL_OP && this.cancelsCalls) return; // answered by every instance on its own subscription
    const bound = this.ops.get(op);
    let encoding: Encoding = Encoding.MsgPack;
    let traceparent: string | undefined;
    let grant: string | undefined;
    try {
      const read = requestHeadersOf(msg);
      traceparent = read.context.traceparent;
      grant = read.context.grant;
      if (read.json) encoding = Encoding.Json;
      if (bound === undefined) {
        throw new NotFoundError(`mount ${this.name} has no op '${op}'; it answers ${[...this.ops.keys()].join(', ')}`);
      }
      const checking = bound.spec.beforeBody?.(read.context, msg.reply, read.requestInfo, this.nc.info?.version);
      if (checking instanceof Promise) {
        checking
          .then(
            () => this.afterCheck(msg, op, bound, read, encoding, started),
            (err: unknown) => {
              const error = this.fail(msg, err, encoding, bound, started);
              this.options.onRefused?.({ op, data: msg.data, traceparent, grant, error });
            },
          )
          // Off the subscription's guarded callback: an answer that cannot go out (a connection
          // closed meanwhile) must not become an unhandled rejection.
          .catch((err: unknown) =>
            this.logger.error('a request could not be answered after its headers were checked', {
              subject: msg.subject,
              error: String(err),
            }),
          );
        return;
      }
      this.afterCheck(msg, op, bound, read, encoding, started);
    } catch (err) {
      const error = this.fail(msg, err, encoding, bound, started);
      this.options.onRefused?.({ op, data: msg.data, traceparent, grant, error });
    }
  }

  /** The request once its headers passed `beforeBody`: its body read, then handled and answered. */
  private afterCheck(
    msg: Msg,
    op: string,
    bound: BoundOp,
    read: ReturnType<typeof requestHeadersOf>,
    encoding: Encoding,
    started: number,
  ): void {
    let ran = false;
    try {
      const request = this.readBody(msg, op, bound, encoding);
      if (read.context.deadline !== undefined && read.context.deadline <= Date.now()) {
        throw new TimeoutError(`the caller's deadline passed before ${op} started`);
      }
      ran = true;
      const ctx = new RequestContext(read.context, this.name, op, encoding, read.progress, this.nc, msg);
      const result = bound.spec.handle(request as never, ctx);
      // A handler that answers at once is answered at once; only a promise is waited for.
      if (result instanceof Promise) void this.answerWhenSettled(msg, result, encoding, bound, started, ctx);
      else {
        ctx.settle();
        this.reply(msg, result, encoding, bound, started);
      }
    } catch (err) {
      const error = this.fail(msg, err, encoding, bound, started);
      const { traceparent, grant } = read.context;
      if (!ran) this.options.onRefused?.({ op, data: msg.data, traceparent, grant, error });
    }
  }

  /**
   * The request body: within the size bound, its shape bounded from its bytes (depth, entries,
   * values, top-level keys), then decoded and valid against the op's schema.
   */
  private readBody(msg: Msg, op: string, bound: BoundOp, encoding: Encoding): Record<string, unknown> {
    if (msg.data.length > this.maxRequestBytes) {
      throw new PayloadTooLargeError(
        `request body is ${msg.data.length} bytes; ${this.name} accepts at most ${this.maxRequestBytes}`,
      );
    }
    const key = bound.memo?.keyOf(msg.data, encoding);
    const known = key === undefined ? undefined : bound.memo?.get(key);
    if (known !== undefined) return known;
    const request = decodeMap(msg.data, encoding, bound.knownKeys);
    const violations = bound.check(request, { bytes: msg.data.length });
    if (violations !== undefined) throw badRequest(op, violations);
    if (key !== undefined) bound.memo?.set(key, request);
    return request;
  }

  /** Answers once the handler's promise settles; `stop()` waits for every one of these. */
  private async answerWhenSettled(
    msg: Msg,
    pending: Promise<unknown>,
    encoding: Encoding,
    bound: BoundOp,
    started: number,
    ctx: RequestContext,
  ): Promise<void> {
    this.inFlight++;
    const callId = ctx.callId;
    if (callId !== undefined) this.calls.set(callId, ctx);
    try {
      const value = await pending;
      ctx.settle();
      this.reply(msg, value, encoding, bound, started);
    } catch (err) {
      ctx.settle();
      this.fail(msg, err, encoding, bound, started);
    } finally {
      if (callId !== undefined && this.calls.get(callId) === ctx) this.calls.delete(callId);
      if (--this.inFlight === 0) this.idle?.();
    }
  }

  /**
   * `$cancel {callId}`: fires the signal of the request with that `Matrix-Call-Id` and answers
   * `{cancelled: true}`; an instance that does not hold the call stays silent (another may).
   * Every instance hears every `$cancel`: a body longer than any `{callId}` is dropped unread.
   */
  private onCancel(msg: Msg): void {
    if (msg.data.length > MAX_CANCEL_BYTES) return;
    let callId: unknown;
    let encoding: Encoding = Encoding.MsgPack;
    let by: CallContext;
    let requestInfo: string | undefined;
    try {
      const read = requestHeadersOf(msg);
      by = read.context;
      requestInfo = read.requestInfo;
      if (read.json) encoding = Encoding.Json;
      callId = (decodeMap(msg.data, encoding) as { callId?: unknown }).callId;
    } catch {
      return;
    }
    const ctx = typeof callId === 'string' ? this.calls.get(callId) : undefined;
    if (ctx === undefined || !this.mayCancel(ctx, by, msg.reply, requestInfo)) return;
    if (msg.reply && isInboxSubject(msg.reply))
      msg.respond(
        encodeBody({ cancelled: true }, encoding),
        encoding === Encoding.Json ? { headers: jsonHeaders() } : undefined,
      );
  }

  /**
   * Is `$cancel` from the call's own caller? Its headers must pass the call's op's own
   * `beforeBody` (a grant bound to its holder holds only for that holder), then name the same
   * principal, session and grant: a copy of the grant text cancels nothing.
   */
  private mayCancel(
    ctx: RequestContext,
    by: CallContext,
    reply: string | undefined,
    requestInfo: string | undefined,
  ): boolean {
    try {
      const checking = this.ops.get(ctx.op)?.spec.beforeBody?.(by, reply ?? '', requestInfo, this.nc.info?.version);
      // A check that must wait is of a grant the call's own check did not leave verified: not its caller's.
      if (checking instanceof Promise) {
        checking.catch(() => {});
        return false;
      }
    } catch {
      return false;
    }
    return ctx.cancel(by);
  }

  private reply(msg: Msg, value: unknown, encoding: Encoding, bound: BoundOp, started: number): void {
    let data: Uint8Array;
    try {
      data = value instanceof Encoded ? value.bytes(encoding) : encodeBody(value, encoding);
    } catch (err) {
      this.fail(msg, err, encoding, bound, started);
      return;
    }
    if (data.length > this.maxPayload) {
      const err = new PayloadTooLargeError(
        `reply of ${msg.subject} is ${data.length} bytes, over the server's max_payload of ${this.maxPayload}; ask for less (a smaller page, fewer refs)`,
      );
      this.fail(msg, err, encoding, bound, started);
      return;
    }
    msg.respond(data, encoding === Encoding.Json ? { headers: jsonHeaders() } : undefined);
    this.record(bound, started);
  }

  private fail(msg: Msg, err: unknown, encoding: Encoding, bound: BoundOp | undefined, started: number): MatrixError {
    // A handler stopped by its cancelled signal answers a caller that no longer waits: not a
    // failure to log.
    const error =
      err instanceof MatrixError
        ? err
        : err instanceof CancelledError
          ? new UnavailableError(err.message)
          : this.internal(err, msg.subject);
    const h = encoding === Encoding.Json ? jsonHeaders() : new OutgoingHeaders();
    h.put(Header.ServiceErrorCode, String(error.status));
    h.put(Header.ServiceError, headerSafe(error.message));
    msg.respond(encodeBody(error.toBody(), encoding), { headers: h });
    if (bound !== undefined) this.record(bound, started, `${error.status}:${error.message}`);
    return error;
  }

  private internal(err: unknown, subject: string): InternalError {
    this.logger.error('unexpected failure', { subject, error: err instanceof Error ? err.stack : String(err) });
    return new InternalError(`an unexpected error occurred in ${this.name}; it was logged`, { cause: err });
  }

  private record(bound: BoundOp, started: number, error?: string): void {
    const s = bound.stats;
    s.num_requests++;
    s.processing_time += Math.round((performance.now() - started) * 1e6);
    s.average_processing_time = Math.round(s.processing_time / s.num_requests);
    if (error !== undefined) {
      s.num_errors++;
      s.last_error = error;
    }
  }

  private get maxPayload(): number {
    return this.nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD;
  }

  private get maxRequestBytes(): number {
    return this.options.maxRequestBytes ?? this.maxPayload;
  }

  private schemaOf(ref: SchemaRef): Record<string, unknown> {
    return typeof ref === 'string' ? this.contracts.schema(ref) : ref;
  }

  private introspectOp(): OpSpec<Record<string, never>, Record<string, unknown>> {
    return {
      description: 'Describes this mount: its ops with their schemas, and this instance.',
      request: SchemaId.IntrospectRequest,
      response: SchemaId.IntrospectReply,
      handle: () => ({
        mount: this.name,
        version: this.options.version,
        ops: [...this.ops.entries()].map(([op, o]) => ({
          op,
          description: o.spec.description,
          requestSchema: this.schemaOf(o.spec.request),
          responseSchema: this.schemaOf(o.spec.response),
        })),
        ...this.options.describe?.(),
        instance: { id: this.id, startedAt: this.startedAt.toISOString() },
      }),
    };
  }
}

/** Bodies at most this long are remembered by their bytes. */
const MEMO_MAX_BYTES = 1024;
/** Distinct bodies remembered per op; past it the memo starts afresh. */
const MEMO_ENTRIES = 1000;

/**
 * Valid requests by the bytes they came in (a string of them, one character a byte, with the
 * encoding): a body byte-identical to one seen is neither decoded nor validated again.
 */
class RequestMemo {
  private readonly requests = new Map<string, Record<string, unknown>>();

  /** The memo key of a body, or undefined when it is too long to remember. */
  keyOf(data: Uint8Array, encoding: Encoding): string | undefined {
    if (data.length > MEMO_MAX_BYTES) return undefined;
    return encoding + Buffer.from(data.buffer, data.byteOffset, data.length).toString('latin1');
  }

  get(key: string): Record<string, unknown> | undefined {
    return this.requests.get(key);
  }

  set(key: string, request: Record<string, unknown>): void {
    if (this.requests.size >= MEMO_ENTRIES) this.requests.clear();
    this.requests.set(key, deepFreeze(request));
  }
}

/**
 * Freezes a decoded body and everything in it: one object serves every request of the same bytes.
 */
function deepFreeze<T extends object>(value: T): T {
  for (const child of Object.values(value))
    if (child !== null && typeof child === 'object' && !Object.isFrozen(child)) deepFreeze(child);
  return Object.freeze(value);
}

function badRequest(op: string, violations: NonNullable<ReturnType<Check>>): MatrixError {
  return new BadRequestError(`invalid ${op} request: ${describeViolations(violations)}`, {
    details: violationDetails(violations),
  });
}

function jsonHeaders(): OutgoingHeaders {
  return new OutgoingHeaders().put(Header.ContentType, JSON_CONTENT_TYPE);
}

/** Header values are one line of limited length. */
function headerSafe(message: string): string {
  const line = message.replace(/[\r\n]+/g, ' ');
  return line.length > 1024 ? `${line.slice(0, 1021)}...` : line;
}

/*
 * The op's context. Built field by field, one shape for every request; the signal, its
 * controller and its deadline timer exist only once a handler asks for `signal`.
 */

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

  /**
   * Publishes a progress report onto the reply subject, only for a request that carried
   * `Matrix-Progress: 1` (PROTOCOL 10): a plain request–reply client takes the first message on
   * its reply subject as the reply, so a report to it would stand in for the answer.
   */
  progress(progress: number, total?: number, message?: string): void {
    if (!this.wantsProgress || this.settled || !Number.isFinite(progress)) return;
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
