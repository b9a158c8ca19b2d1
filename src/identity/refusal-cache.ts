/**
 * Grant texts refused once, refused again from memory. A grant from a trusted issuer whose
 * signature fails costs a base64 decode, a JSON parse, an ed25519 check over its (up to 16 KiB)
 * text and a SHA-512 of its claims, and is never a verified grant to cache: the same text sent
 * again is answered here for the price of one SHA-256. Keyed by that hash (the text itself is
 * not kept), bounded in bytes (the oldest go first), each entry held a bounded time.
 */
import { sha256Hex } from '../bus/codec.js';
import { GrantError } from './errors.js';
import { GrantFailure } from './types.js';

/** Default bound of the refusal cache, in bytes: about 5,000 refusals. */
export const DEFAULT_REFUSAL_CACHE_BYTES = 4 * 1024 * 1024;
/** Default time a refusal is held, in ms: a minute. */
export const DEFAULT_REFUSAL_TTL_MS = 60_000;
/** What an entry costs besides its key and message (the entry object, map slot), in bytes. */
const ENTRY_OVERHEAD = 256;

/** A refused grant as held: enough to throw the same `GrantError` again. */
interface RefusedGrant {
  readonly failure: GrantFailure;
  readonly message: string;
  readonly subject: string | undefined;
  readonly session: string | undefined;
  /** When the entry lapses, Unix ms. */
  readonly untilMs: number;
  /** Bytes it counts against the bound. */
  readonly cost: number;
}

/**
 * Is a refusal of this failure the same refusal a minute later? All but `not_yet_valid` (which
 * time cures within its slack) and `revoked` (a state of the revocations, checked on every call).
 */
export function isLasting(failure: GrantFailure): boolean {
  return failure !== GrantFailure.NotYetValid && failure !== GrantFailure.Revoked;
}

/** A byte-bounded, time-bounded map from a grant text's hash to its refusal. */
export class RefusalCache {
  private readonly entries = new Map<string, RefusedGrant>();
  private used = 0;
  /** The text refused last, compared before hashing: a flood sends one text again and again. */
  private lastText: string | undefined;
  private lastRefusal: RefusedGrant | undefined;
  /** The text `get` hashed last and did not find, and its key: `set` after a miss hashes it once, not twice. */
  private missedText: string | undefined;
  private missedKey: string | undefined;

  constructor(
    readonly maxBytes = DEFAULT_REFUSAL_CACHE_BYTES,
    readonly ttlMs = DEFAULT_REFUSAL_TTL_MS,
  ) {}

  /** The refusal of `text` held at `now` (Unix ms), as a fresh `GrantError`; undefined when none is. */
  get(text: string, now: number): GrantError | undefined {
    let refusal = this.lastText === text ? this.lastRefusal : undefined;
    let key: string | undefined;
    if (refusal === undefined) {
      key = keyOf(text);
      refusal = this.entries.get(key);
    }
    if (refusal === undefined) {
      // Not found by key (found by `lastText` means found): `key` is defined here.
      this.missedText = text;
      this.missedKey = key;
      return undefined;
    }
    if (now >= refusal.untilMs) {
      key ??= keyOf(text);
      this.delete(key, refusal);
      this.missedText = text;
      this.missedKey = key;
      return undefined;
    }
    this.lastText = text;
    this.lastRefusal = refusal;
    const err = new GrantError(refusal.failure, refusal.message);
    err.subject = refusal.subject;
    err.session = refusal.session;
    return err;
  }

  /** Holds the refusal `err` of `text` from `now` for `ttlMs`, evicting the oldest until the cache fits its bound. */
  set(text: string, err: GrantError, now: number): void {
    const key = (text === this.missedText ? this.missedKey : undefined) ?? keyOf(text);
    if (this.entries.has(key)) return;
    const cost = (key.length + err.message.length) * 2 + ENTRY_OVERHEAD;
    if (cost > this.maxBytes) return;
    for (const [old, refusal] of this.entries) {
      if (this.used + cost <= this.maxBytes) break;
      this.delete(old, refusal);
    }
    const refusal: RefusedGrant = {
      failure: err.failure,
      message: err.message,
      subject: err.subject,
      session: err.session,
      untilMs: now + this.ttlMs,
      cost,
    };
    this.entries.set(key, refusal);
    this.used += cost;
  }

  /** Refusals held. */
  get size(): number {
    return this.entries.size;
  }

  /** Bytes held, by the estimate the bound uses. */
  get bytes(): number {
    return this.used;
  }

  private delete(key: string, refusal: RefusedGrant): void {
    if (this.lastRefusal === refusal) {
      this.lastText = undefined;
      this.lastRefusal = undefined;
    }
    this.entries.delete(key);
    this.used -= refusal.cost;
  }
}

/** The key of a grant text: its SHA-256, so a 16 KiB text costs 64 characters held. */
function keyOf(text: string): string {
  return sha256Hex(text);
}
