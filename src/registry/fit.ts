/**
 * Does a context fit (PROTOCOL 7)? Its `$resolve` reply, alone, in every provider format and
 * both encodings, must stay under the server's `max_payload`; one that does not could be
 * registered but never delivered.
 */
import { Encoding, encodeBody } from '../bus/codec.js';
import { resolveToolContext } from './resolver.js';
import type { StoredContext, ToolContextStore } from './store.js';
import { ProviderFormat, type ResolveRequest, type ToolContextSpec } from './types.js';

/** The rendering of a resolution that did not fit. */
export interface Overflow {
  format: ProviderFormat;
  strict: boolean;
  encoding: Encoding;
  /** Size of that reply, in bytes. */
  bytes: number;
}

/** Every rendering a client may ask for. */
const renderings: ReadonlyArray<{ format: ProviderFormat; strict: boolean }> = [
  { format: ProviderFormat.Matrix, strict: false },
  { format: ProviderFormat.OpenAI, strict: false },
  { format: ProviderFormat.OpenAI, strict: true },
  { format: ProviderFormat.Anthropic, strict: false },
  { format: ProviderFormat.Mcp, strict: false },
];

/**
 * The first rendering of `spec`'s resolution that does not fit in `maxPayload`, or undefined.
 * With `storedBytes` (the spec's size as stored), a context whose every rendering is bounded
 * well under the limit is not rendered at all: loading a bucket of 100,000 small contexts
 * must not resolve each one five times.
 */
export function resolutionOverflow(
  spec: ToolContextSpec,
  maxPayload: number,
  storedBytes?: number,
): Overflow | undefined {
  if (storedBytes !== undefined && replyBound(spec, storedBytes) < maxPayload) return undefined;
  // Alone: capabilities it requires are other contexts' tools, not its own size.
  const store = soleContextStore({ ...spec, requires: undefined });
  for (const { format, strict } of renderings) {
    const request: ResolveRequest = { profile: 'fit', toolContextRefs: [spec.key], format, strict };
    const resolved = resolveToolContext(request, store);
    for (const encoding of [Encoding.MsgPack, Encoding.Json]) {
      const bytes = encodeBody(resolved, encoding).length;
      if (bytes > maxPayload) return { format, strict, encoding, bytes };
    }
  }
  return undefined;
}

/**
 * A generous upper bound on any rendering's size: each tool appears twice (projection and
 * provider tool; a strict schema is at most about six times its text, an optional `"a":{}`
 * becoming `"a":{"anyOf":[{},{"type":"null"}]}` and a `required` entry), with its context's
 * `allowTargets` and a diagnostic of its own (at most ~1 KB: they quote at most 500 characters
 * of a schema); each SDK tool may carry a diagnostic too.
 */
function replyBound(spec: ToolContextSpec, storedBytes: number): number {
  const tools = spec.matrixTools?.length ?? 0;
  const allowTargets = spec.permissions.allowTargets?.reduce((n, t) => n + t.length + 3, 0) ?? 0;
  return 8 * storedBytes + (tools + (spec.sdkTools?.length ?? 0) + 8) * 1_500 + tools * allowTargets;
}

/** A store that holds one context and nothing else, at the highest revision a reply may carry. */
function soleContextStore(spec: ToolContextSpec): ToolContextStore {
  const stored: StoredContext = { spec, source: 'registered', revision: 1 };
  const keys = [spec.key];
  return {
    revision: Number.MAX_SAFE_INTEGER,
    get: (key) => (key === spec.key ? stored : undefined),
    keys: () => keys,
    providersOf: () => [],
  };
}
