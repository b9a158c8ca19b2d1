/**
 * Hits and misses of the caches on the call path, counted where the lookup happens: a plain
 * integer increment, nothing else. The `matrix.cache.lookups` metric reads these counts at
 * each collection (instruments.ts); with no SDK registered nobody reads them.
 */

/** Lookups of one cache since the process started. */
export interface LookupCount {
  hit: number;
  miss: number;
}

/**
 * Lookups by cache: `$resolve` resolutions (registry), sessions (dispatcher), verified grants
 * (identity). A session lookup that finds its resolve still in flight is a hit: it starts no
 * second one. A grant that fails verification is a miss.
 */
export const cacheLookups = {
  resolutions: { hit: 0, miss: 0 } as LookupCount,
  sessions: { hit: 0, miss: 0 } as LookupCount,
  grants: { hit: 0, miss: 0 } as LookupCount,
} as const;

/** The name of a counted cache, as the metric's `matrix.cache` attribute says it. */
export type CacheName = keyof typeof cacheLookups;
