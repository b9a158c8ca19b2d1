/**
 * Where the registry's contexts live. The resolver reads only through `ToolContextStore`,
 * so the built-in list and a JetStream KV store are interchangeable behind it.
 */
import { builtinContexts } from './builtins.js';
import type { ContextSource, ToolContextSpec } from './types.js';

/** A context as the store holds it. */
export interface StoredContext {
  spec: ToolContextSpec;
  source: ContextSource;
  /** Revision of the context's last change; 0 for built-ins. */
  revision: number;
}

/** Read access to the contexts; every method is synchronous and cheap. */
export interface ToolContextStore {
  /** The registry's revision: grows with every change. */
  readonly revision: number;
  /** One context by key. */
  get(key: string): StoredContext | undefined;
  /** Every key, sorted (code-point order); read it at once, a change may update it in place. */
  keys(): readonly string[];
  /** Keys of the contexts that provide a capability, sorted; read it at once, likewise. */
  providersOf(capability: string): readonly string[];
  /** Calls `listener` for each change of a store that changes; returns a function that stops it. */
  onChange?(listener: (change: StoreChange) => void): () => void;
  /** Stored contexts not served because `$register` would refuse them, in key order. */
  leftOutEntries?(): readonly LeftOutEntry[];
}

/** A stored context that is not served, and why. */
export interface LeftOutEntry {
  key: string;
  /** The revision it was stored at. */
  revision: number;
  /** `<code>: <message>`, the error `$register` would have answered. */
  error: string;
}

/** A change a store applied. */
export interface StoreChange {
  key: string;
  change: 'registered' | 'updated' | 'unregistered';
  revision: number;
}

/** An immutable set of contexts: the built-ins by default, or any fixed list. */
export class StaticStore implements ToolContextStore {
  private readonly byKey = new Map<string, StoredContext>();
  private readonly sortedKeys: string[];
  private readonly providers = new Map<string, string[]>();

  constructor(
    entries: Iterable<StoredContext> = builtinContexts.map((spec) => storedBuiltin(spec)),
    readonly revision = 0,
  ) {
    for (const entry of entries) {
      if (this.byKey.has(entry.spec.key)) throw new Error(`duplicate context key ${entry.spec.key}`);
      this.byKey.set(entry.spec.key, entry);
    }
    this.sortedKeys = [...this.byKey.keys()].sort(compareKeys);
    for (const key of this.sortedKeys) {
      for (const capability of this.byKey.get(key)?.spec.provides ?? []) {
        const list = this.providers.get(capability) ?? [];
        list.push(key);
        this.providers.set(capability, list);
      }
    }
  }

  get(key: string): StoredContext | undefined {
    return this.byKey.get(key);
  }

  keys(): readonly string[] {
    return this.sortedKeys;
  }

  providersOf(capability: string): readonly string[] {
    return this.providers.get(capability) ?? [];
  }
}

/** Code-point order, the same on every machine and locale. */
export function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A built-in spec as the store holds it. */
export function storedBuiltin(spec: ToolContextSpec): StoredContext {
  return { spec, source: 'built-in', revision: 0 };
}
