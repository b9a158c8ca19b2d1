/**
 * Caches bounded in bytes as well as entries: a count alone lets a few huge entries (a
 * session request of half a megabyte, say) take the process's memory. Sizes are estimates
 * the caller already has at hand (a text's length, an encoding's byte count), not a walk.
 */

/** How much a cache may hold. */
export interface CacheBounds {
  /** Most entries. */
  maxEntries: number;
  /** Most bytes, summed over the entries' estimated sizes. */
  maxBytes: number;
}

interface Sized<V> {
  value: V;
  bytes: number;
}

/** A least-recently-used cache within `maxEntries` and `maxBytes`; an entry larger than `maxBytes` is not kept. */
export class BoundedCache<V> {
  private readonly entries = new Map<string, Sized<V>>();
  private totalBytes = 0;

  constructor(readonly bounds: CacheBounds) {}

  /** The value of `key`, now the most recently used. */
  get(key: string): V | undefined {
    const hit = this.entries.get(key);
    if (hit === undefined) return undefined;
    this.entries.delete(key);
    this.entries.set(key, hit);
    return hit.value;
  }

  /** Keeps `value` under `key`, evicting the least recently used entries to make room. */
  set(key: string, value: V, bytes: number): void {
    this.delete(key);
    if (bytes > this.bounds.maxBytes) return;
    this.entries.set(key, { value, bytes });
    this.totalBytes += bytes;
    for (const [oldest, entry] of this.entries) {
      if (this.entries.size <= this.bounds.maxEntries && this.totalBytes <= this.bounds.maxBytes) break;
      this.entries.delete(oldest);
      this.totalBytes -= entry.bytes;
    }
  }

  /** Drops `key`. */
  delete(key: string): void {
    const held = this.entries.get(key);
    if (held === undefined) return;
    this.entries.delete(key);
    this.totalBytes -= held.bytes;
  }

  /** Drops every entry. */
  clear(): void {
    this.entries.clear();
    this.totalBytes = 0;
  }

  /** Number of entries. */
  get size(): number {
    return this.entries.size;
  }

  /** Estimated bytes held. */
  get bytes(): number {
    return this.totalBytes;
  }
}
