/**
 * Verified grants by their text: a signature is checked once, not per call. Bounded in bytes
 * (the oldest go first) and never serving a grant past its `exp`.
 */
import type { VerifiedGrant } from './types.js';

/** Default bound of the cache, in bytes. */
export const DEFAULT_GRANT_CACHE_BYTES = 8 * 1024 * 1024;
/** What an entry costs besides its text (claims objects, map slot), in bytes. */
const ENTRY_OVERHEAD = 512;

/** A byte-bounded map of verified grants. */
export class GrantCache {
  private readonly entries = new Map<string, VerifiedGrant>();
  private used = 0;
  /** The entry found last: a caller sends the same grant call after call, compared here without hashing its text. */
  private last: VerifiedGrant | undefined;

  constructor(readonly maxBytes = DEFAULT_GRANT_CACHE_BYTES) {}

  /** The verified grant of this text while it is valid at `now` (Unix ms); drops it once expired. */
  get(text: string, now: number): VerifiedGrant | undefined {
    const last = this.last;
    const hit = last !== undefined && last.text === text ? last : this.entries.get(text);
    if (hit === undefined) return undefined;
    if (now < hit.expiresAtMs) {
      this.last = hit;
      return hit;
    }
    this.delete(text, hit);
    return undefined;
  }

  /** Keeps a verified grant, evicting the oldest until the cache fits its bound. */
  set(grant: VerifiedGrant): void {
    const size = costOf(grant);
    if (size > this.maxBytes || this.entries.has(grant.text)) return;
    for (const [text, old] of this.entries) {
      if (this.used + size <= this.maxBytes) break;
      this.delete(text, old);
    }
    this.entries.set(grant.text, grant);
    this.used += size;
  }

  /** Drops every grant `revoked` says is revoked. */
  dropWhere(revoked: (grant: VerifiedGrant) => boolean): void {
    for (const [text, grant] of this.entries) if (revoked(grant)) this.delete(text, grant);
  }

  /** Grants held. */
  get size(): number {
    return this.entries.size;
  }

  /** Bytes held, by the estimate the bound uses. */
  get bytes(): number {
    return this.used;
  }

  private delete(text: string, grant: VerifiedGrant): void {
    if (this.last === grant) this.last = undefined;
    this.entries.delete(text);
    this.used -= costOf(grant);
  }
}

function costOf(grant: VerifiedGrant): number {
  return grant.text.length * 2 + ENTRY_OVERHEAD;
}
