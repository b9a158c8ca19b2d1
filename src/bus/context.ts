/**
 * The context of a request: what it carries besides its body (PROTOCOL section 3), read from
 * every request and passed on to every downstream call (as headers: `headers.ts`), its trace
 * and deadline, and what an op handler gets besides its body (PROTOCOL 10, `RequestContext`):
 * that context, a way to report progress onto the request's reply subject before the reply, and
 * an `AbortSignal` that fires on `<mount>.$cancel {callId}` for this request's `Matrix-Call-Id`
 * or at its deadline. The types only: a mount builds each request's context (`RequestContext`,
 * mount.ts), and the trace and deadline helpers sit with the headers that carry them (headers.ts).
 */
import type { Encoding } from './codec.js';

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
  /**
   * The caller sent `Matrix-Progress: 1`: it takes progress reports (a mount that relays them need
   * not build any otherwise).
   */
  wantsProgress: boolean;
  /**
   * Fires when the dispatcher cancels this request (`<mount>.$cancel {callId}`) or its deadline
   * passes; its `reason` says which. A handler that works long should stop when it fires.
   */
  readonly signal: AbortSignal;
  /**
   * Reports progress to the caller (a message with `Matrix-Progress: 1` on the reply subject).
   * Does nothing for a request that did not ask (`wantsProgress` false), after the reply, or for
   * a request that is a publish.
   */
  progress(progress: number, total?: number, message?: string): void;
}
