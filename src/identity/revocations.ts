/**
 * Revoked grants (PROTOCOL 3.1): by `jti` (one grant), or by `sub` (every grant of a principal
 * issued at or before the revocation; one issued later holds). Each revocation lasts until the
 * grants it names would have expired anyway (`until`), then it is dropped. `Revocations` is the
 * in-memory set every verifier consults on every call, cached grant or not; `RevocationStore`
 * keeps them in a KV bucket that every instance watches, so a revocation written by one is
 * refused by all within the watch's delivery time (well under a second on one server).
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { sha256Hex } from '../bus/codec.js';
import { BadRequestError } from '../bus/errors.js';
import { Bucket, type BucketWatch } from '../bus/kv.js';
import { principalKey } from './principal.js';
import type { GrantClaims } from './types.js';

/** One revocation, as it is stored. */
export interface Revocation {
  /** The revoked grant's `jti`. */
  jti?: string;
  /** The revoked principal (`sub`): its grants issued at or before `revokedAt`. */
  sub?: string;
  /** Why, for the audit and the console; at most 512 characters. */
  reason?: string;
  /** When it was revoked, Unix ms. */
  revokedAt: number;
  /** When it ends, Unix ms: when the grants it names would have expired. */
  until: number;
}

/** `system.tools.$revoke` request: one of `jti`, `sub`. */
export interface RevokeRequest {
  /** One grant, by its `jti`. */
  jti?: string;
  /** Every grant of this principal issued at or before now. */
  sub?: string;
  /** Why; at most 512 characters. */
  reason?: string;
  /** When the revocation ends (ISO 8601); default and most: now plus the longest grant lifetime accepted. */
  until?: string;
}

/** `system.tools.$revoke` reply. */
export interface RevokeReply {
  /** Its key in the revocations bucket. */
  key: string;
  /** The bucket's revision of the write. */
  revision: number;
  /** When it ends (ISO 8601). */
  until: string;
}

/**
 * The revocation a request asks for at `now`: it ends at `until`, never later than `now +
 * maxTtlMs` (no grant accepted here lives longer), never before now (`BadRequestError`).
 */
export function revocationOf(request: RevokeRequest, now: number, maxTtlMs: number): Revocation {
  if ((request.jti === undefined) === (request.sub === undefined))
    throw new BadRequestError('a revocation names exactly one of jti (one grant) and sub (a principal)', {
      details: { violations: [{ path: '', message: 'must have exactly one of jti, sub', keyword: 'oneOf' }] },
    });
  let until = now + maxTtlMs;
  if (request.until !== undefined) {
    const asked = Date.parse(request.until);
    if (!Number.isFinite(asked) || asked <= now)
      throw new BadRequestError(`until must be a time in the future (ISO 8601), not ${JSON.stringify(request.until)}`, {
        details: { violations: [{ path: '/until', message: 'must be an ISO 8601 time in the future' }] },
      });
    until = Math.min(until, asked);
  }
  const r: Revocation = { revokedAt: now, until };
  if (request.jti !== undefined) r.jti = request.jti;
  if (request.sub !== undefined) r.sub = request.sub;
  if (request.reason !== undefined) r.reason = request.reason;
  return r;
}

/** The KV bucket of revocations. */
export const DEFAULT_REVOCATIONS_BUCKET = 'matrix-revocations';

/** The bucket key of a revocation: `jti.<sha256 of jti>` or `sub.<sha256 of sub>` (neither is a valid key as it is). */
export function revocationKey(r: Pick<Revocation, 'jti' | 'sub'>): string {
  if (r.jti !== undefined) return `jti.${sha256Hex(r.jti)}`;
  if (r.sub !== undefined) return `sub.${sha256Hex(r.sub)}`;
  throw new Error('a revocation names a jti or a sub');
}

/** The revocations in force, by jti and by principal; told when one is added. */
export class Revocations {
  private readonly byKey = new Map<string, Revocation>();
  private readonly byJti = new Map<string, Revocation>();
  /** By the principal's `principalKey`: a revocation of `agent:alpha` reaches `Agent:Alpha` too. */
  private readonly bySub = new Map<string, Revocation>();
  private readonly listeners = new Set<(r: Revocation) => void>();

  constructor(private readonly now: () => number = Date.now) {}

  /**
   * The revocation that refuses a grant with these claims now, if any. A revocation by principal
   * refuses the grants issued up to `issuedSlackMs` after it as well: the verifier lets `iat` run
   * that far ahead of its clock, so a grant issued just before the revocation by a clock that runs
   * ahead carries an `iat` past it.
   */
  find(claims: Pick<GrantClaims, 'jti' | 'sub' | 'iat'>, issuedSlackMs = 0): Revocation | undefined {
    if (this.byKey.size === 0) return undefined;
    const now = this.now();
    const byJti = this.byJti.get(claims.jti);
    if (byJti !== undefined && now < byJti.until) return byJti;
    const bySub = this.bySub.get(principalKey(claims.sub));
    if (bySub !== undefined && now < bySub.until && claims.iat * 1000 <= bySub.revokedAt + issuedSlackMs) return bySub;
    return undefined;
  }

  /** Adds (or replaces) a revocation under its key; listeners hear it. */
  apply(key: string, r: Revocation): void {
    this.remove(key);
    this.byKey.set(key, r);
    if (r.jti !== undefined) this.byJti.set(r.jti, r);
    if (r.sub !== undefined) this.bySub.set(principalKey(r.sub), r);
    for (const listener of this.listeners) listener(r);
  }

  /** Drops the revocation under `key`. */
  remove(key: string): void {
    const r = this.byKey.get(key);
    if (r === undefined) return;
    this.byKey.delete(key);
    if (r.jti !== undefined && this.byJti.get(r.jti) === r) this.byJti.delete(r.jti);
    if (r.sub !== undefined && this.bySub.get(principalKey(r.sub)) === r) this.bySub.delete(principalKey(r.sub));
  }

  /** Keys of revocations past their `until` at `now`. */
  expired(now = this.now()): string[] {
    return [...this.byKey].filter(([, r]) => now >= r.until).map(([key]) => key);
  }

  /** Calls `listener` on each revocation added; returns a function that stops. */
  onRevoked(listener: (r: Revocation) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Revocations held. */
  get size(): number {
    return this.byKey.size;
  }
}

/** How often expired revocations are deleted from the bucket, in ms. */
const SWEEP_MS = 60_000;

/**
 * The revocations bucket: `revoke()` writes one; `watch()` keeps a `Revocations` in step with
 * the bucket. Each record ends at its `until`: where the server has per-message TTL it removes
 * the record then (the write carries the time left as its TTL) and the watch hears its marker;
 * on older servers the watch's sweeper deletes records past their `until`. The bucket's
 * `max_age` is the longest a grant may live, so nothing outlives it either way.
 */
export class RevocationStore {
  private constructor(
    private readonly bucket: Bucket,
    /** The longest grant lifetime accepted, in ms: the longest a revocation lasts. */
    readonly maxTtlMs: number,
  ) {}

  /** Opens (or creates) the bucket; `maxAgeMs` is the longest grant lifetime this deployment accepts. */
  static async open(
    nc: NatsConnection,
    options: { bucket?: string; maxAgeMs: number; replicas?: number },
  ): Promise<RevocationStore> {
    const bucket = await Bucket.open(nc, options.bucket ?? DEFAULT_REVOCATIONS_BUCKET, {
      maxAgeMs: options.maxAgeMs,
      replicas: options.replicas,
      history: 1,
      expiring: true,
    });
    return new RevocationStore(bucket, options.maxAgeMs);
  }

  /**
   * Binds to the bucket the service made, read-only (no create, no configuration check): for a
   * reader whose NATS user may only watch it (`auth-callout`); `UnavailableError` when it is missing.
   */
  static async bind(nc: NatsConnection, options: { bucket?: string; maxAgeMs: number }): Promise<RevocationStore> {
    return new RevocationStore(await Bucket.bind(nc, options.bucket ?? DEFAULT_REVOCATIONS_BUCKET), options.maxAgeMs);
  }

  /** Does the server remove each revocation at its `until` (per-message TTL), so no sweeper need? */
  get expires(): boolean {
    return this.bucket.expires;
  }

  /** Stores the revocation a `$revoke` request asks for; resolves with its key, revision and end. */
  async revoke(request: RevokeRequest, now = Date.now()): Promise<RevokeReply> {
    const r = revocationOf(request, now, this.maxTtlMs);
    const key = revocationKey(r);
    const revision = await this.bucket.put(key, new TextEncoder().encode(JSON.stringify(r)), r.until - now);
    return { key, revision, until: new Date(r.until).toISOString() };
  }

  /**
   * Keeps `into` in step with the bucket, sweeping expired records where the server does not
   * expire them itself; `stop()` ends both.
   * `caughtUp` resolves once the revocations stored before the watch began are in `into` (or
   * after `catchUpMs`, default 2000, when the bucket's last revision aged out and never comes):
   * an instance that starts serving before then would accept a grant revoked while it was down.
   */
  watch(
    into: Revocations,
    onError: (err: unknown) => void = () => {},
    catchUpMs = 2_000,
  ): BucketWatch & { caughtUp: Promise<void> } {
    let last = Number.POSITIVE_INFINITY;
    let delivered = 0;
    let caught: () => void = () => {};
    const caughtUp = new Promise<void>((resolve) => {
      caught = resolve;
      setTimeout(resolve, catchUpMs).unref();
    });
    this.bucket.lastRevision().then(
      (revision) => {
        last = revision;
        if (delivered >= last) caught();
      },
      () => caught(),
    );
    const watch = this.bucket.watch((entry) => {
      delivered = entry.revision;
      if (entry.operation !== 'PUT') into.remove(entry.key);
      else {
        const r = parseRevocation(entry.value);
        if (r === undefined) onError(new Error(`revocation ${entry.key} is not readable; ignored`));
        else into.apply(entry.key, r);
      }
      if (delivered >= last) caught();
    }, onError);
    const sweep = () => {
      for (const key of into.expired()) {
        into.remove(key);
        this.bucket.delete(key).catch(onError);
      }
    };
    const timer = this.expires ? undefined : setInterval(sweep, SWEEP_MS).unref();
    return {
      caughtUp,
      stop: () => {
        clearInterval(timer);
        watch.stop();
      },
    };
  }
}

/** A stored revocation, or undefined when its bytes are not one. */
function parseRevocation(bytes: Uint8Array): Revocation | undefined {
  try {
    const r = JSON.parse(new TextDecoder().decode(bytes)) as Revocation;
    const named = typeof r.jti === 'string' || typeof r.sub === 'string';
    return named && Number.isFinite(r.revokedAt) && Number.isFinite(r.until) ? r : undefined;
  } catch {
    return undefined;
  }
}
