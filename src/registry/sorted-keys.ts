/**
 * Sorted key lists kept up to date one change at a time: the store's key order and its
 * provider index change by one key per registration, so neither is rebuilt over all N.
 */
import { compareKeys } from './store.js';

/** Index of the first key ≥ `key` in sorted `keys` (binary search). */
export function lowerBound(keys: readonly string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareKeys(keys[mid] as string, key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Inserts `key` into sorted `keys` unless present. */
export function insertSorted(keys: string[], key: string): void {
  const i = lowerBound(keys, key);
  if (keys[i] !== key) keys.splice(i, 0, key);
}

/** Removes `key` from sorted `keys` when present. */
export function removeSorted(keys: string[], key: string): void {
  const i = lowerBound(keys, key);
  if (keys[i] === key) keys.splice(i, 1);
}

/** Capability → sorted keys of the contexts that provide it, changed one context at a time. */
export class ProviderIndex {
  private readonly byCapability = new Map<string, string[]>();

  /** Keys of the providers of `capability`, sorted. */
  of(capability: string): readonly string[] {
    return this.byCapability.get(capability) ?? [];
  }

  /** Records that `key` provides each of `capabilities`. */
  add(key: string, capabilities: readonly string[] | undefined): void {
    for (const c of capabilities ?? []) {
      const keys = this.byCapability.get(c);
      if (keys === undefined) this.byCapability.set(c, [key]);
      else insertSorted(keys, key);
    }
  }

  /** Forgets that `key` provides each of `capabilities`. */
  remove(key: string, capabilities: readonly string[] | undefined): void {
    for (const c of capabilities ?? []) {
      const keys = this.byCapability.get(c);
      if (keys === undefined) continue;
      removeSorted(keys, key);
      if (keys.length === 0) this.byCapability.delete(c);
    }
  }
}
