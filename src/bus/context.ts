/**
 * The context headers of PROTOCOL section 3: read from every request, passed on to
 * every downstream call.
 */
import { randomFillSync } from 'node:crypto';
import { headers as newHeaders, Match, type MsgHdrs } from '@nats-io/nats-core';
import { BadRequestError } from './errors.js';

/** Header names, spelt as they travel. */
export const Header = {
  TraceParent: 'traceparent',
  Deadline: 'Matrix-Deadline',
  Session: 'Matrix-Session',
  Principal: 'Matrix-Principal',
  ContentType: 'Content-Type',
  ServiceErrorCode: 'Nats-Service-Error-Code',
  ServiceError: 'Nats-Service-Error',
} as const;

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
}

const traceparentPattern = /^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/;

/** Reads the context headers of a request; a malformed `Matrix-Deadline` is a bad request. */
export function readContext(h: MsgHdrs | undefined): CallContext {
  const ctx: CallContext = {};
  if (h === undefined) return ctx;
  const traceparent = h.get(Header.TraceParent, Match.IgnoreCase);
  if (traceparent) ctx.traceparent = traceparent;
  const session = h.get(Header.Session, Match.IgnoreCase);
  if (session) ctx.session = session;
  const principal = h.get(Header.Principal, Match.IgnoreCase);
  if (principal) ctx.principal = principal;
  const deadline = h.get(Header.Deadline, Match.IgnoreCase);
  if (deadline) {
    const ms = Number(deadline);
    if (!Number.isSafeInteger(ms) || ms <= 0) {
      throw new BadRequestError(`header ${Header.Deadline} must be a Unix time in milliseconds, got '${deadline}'`, {
        details: { violations: [{ path: '', message: `header ${Header.Deadline} is not a Unix time in ms` }] },
      });
    }
    ctx.deadline = ms;
  }
  return ctx;
}

/**
 * Writes the context into headers (creating them when needed); returns them, or undefined if
 * none. `deadline`, when given, replaces the context's own (the earlier one a client computed).
 */
export function writeContext(ctx: CallContext | undefined, h?: MsgHdrs, deadline = ctx?.deadline): MsgHdrs | undefined {
  if (ctx === undefined) return h;
  if (ctx.traceparent !== undefined) (h ??= newHeaders()).set(Header.TraceParent, ctx.traceparent);
  if (deadline !== undefined) (h ??= newHeaders()).set(Header.Deadline, String(deadline));
  if (ctx.session !== undefined) (h ??= newHeaders()).set(Header.Session, ctx.session);
  if (ctx.principal !== undefined) (h ??= newHeaders()).set(Header.Principal, ctx.principal);
  return h;
}

/** The trace id of a `traceparent`, or undefined when it is not W3C-shaped. */
export function traceIdOf(traceparent: string | undefined): string | undefined {
  if (traceparent === undefined) return undefined;
  return traceparentPattern.exec(traceparent)?.[1];
}

// Random bytes are drawn 4 KiB at a time: one syscall per 170 trace ids, not one per call.
const POOL_SIZE = 4096;
const pool = Buffer.alloc(POOL_SIZE);
let poolOffset = POOL_SIZE;

/** A fresh sampled `traceparent` (a new random trace id and span id). */
export function newTraceparent(): string {
  if (poolOffset + 24 > POOL_SIZE) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const hex = pool.toString('hex', poolOffset, poolOffset + 24);
  poolOffset += 24;
  return `00-${hex.slice(0, 32)}-${hex.slice(32)}-01`;
}

/** The earlier of a relative timeout and an absolute deadline, as an absolute deadline. */
export function deadlineOf(timeoutMs: number, callerDeadline: number | undefined, now = Date.now()): number {
  const own = now + timeoutMs;
  return callerDeadline === undefined ? own : Math.min(own, callerDeadline);
}
