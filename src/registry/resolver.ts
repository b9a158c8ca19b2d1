/**
 * The resolver (PROTOCOL 5.2): a profile, its skills and required capabilities, to one
 * `ResolvedToolContext`. Pure: it reads a `ToolContextStore` and does no I/O, so the same
 * input and store content give the same reply, byte for byte, and the same digest. Choosing the
 * contexts is `select.ts`; merging them, `merge.ts`.
 */
import { digestOf } from './canonical.js';
import { ContextMerge, knownToolText } from './merge.js';
import { renderProviderTools } from './provider-formats.js';
import { deferredTools, defers, SEARCH_TOOL } from './search/search-tool.js';
import { selectContexts } from './select.js';
import type { ToolContextStore } from './store.js';
import { type Diagnostic, ProviderFormat, type ResolvedToolContext, type ResolveRequest } from './types.js';

export { unmetRequirements } from './select.js';

/** The timeout when no merged context or tool sets one, in ms. */
export const DEFAULT_TIMEOUT_MS = 30_000;

/** What the resolver may know beyond the store. */
export interface ResolveOptions {
  /** Whether a mount has a live instance; needed for `onlyAvailable`. */
  isLive?: (mount: string) => boolean;
}

/** Resolves a request against a store; throws `NotFoundError` for unknown refs or unmet capabilities. */
export function resolveToolContext(
  request: ResolveRequest,
  store: ToolContextStore,
  options: ResolveOptions = {},
): ResolvedToolContext {
  const diagnostics: Diagnostic[] = [];
  const selected = selectContexts(request, store, diagnostics);
  const merge = new ContextMerge(diagnostics, request.onlyAvailable ? options.isLive : undefined);
  for (const { spec } of selected) merge.add(spec);
  const merged = merge.result();
  // Built field by field, not spread: the reply's keys in this order, one shape for every reply.
  // Past the threshold the search tool is one of the session's tools: the dispatcher runs it.
  const deferring = defers(request, merged.matrixTools.length);
  const reply: Omit<ResolvedToolContext, 'revision' | 'digest'> &
    Partial<Pick<ResolvedToolContext, 'revision' | 'digest'>> = {
    contexts: selected.map((c) => c.spec.key),
    matrixTools: deferring ? [...merged.matrixTools, SEARCH_TOOL] : merged.matrixTools,
    sdkTools: merged.sdkTools,
    instructions: merged.instructions,
    timeoutMs: Number.isFinite(merged.timeoutMs) ? merged.timeoutMs : DEFAULT_TIMEOUT_MS,
    environmentRequirements: merged.environmentRequirements,
    verification: merged.verification,
    diagnostics,
  };
  if (request.onlyAvailable && options.isLive === undefined) {
    diagnostics.push({
      level: 'info',
      code: 'presence_unknown',
      message: 'onlyAvailable: this registry cannot see which mounts are live, so no tool was left out',
    });
  }
  const format = request.format ?? ProviderFormat.Matrix;
  const providerTools = renderProviderTools(merged.matrixTools, format, request.strict === true, diagnostics);
  if (providerTools !== undefined && deferring && (format === 'anthropic' || format === 'openai'))
    reply.providerTools = deferredTools(providerTools, format, request.defer ?? {}, diagnostics);
  else if (providerTools !== undefined) reply.providerTools = providerTools;
  // The digest is of the reply before it has one (PROTOCOL 5.2: without `revision` and `digest`).
  const digest = digestOf(reply, knownToolText);
  reply.revision = store.revision;
  reply.digest = digest;
  return reply as ResolvedToolContext;
}
