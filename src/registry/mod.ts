export { BUILTIN_TOOL_NAMES, BuiltinKey, builtinContexts, builtinRefsFor, MATRIX_INVOKE } from './builtins.js';
export { canonicalJson, digestOf } from './canonical.js';
export { CHANGED_EVENTS, watchRegistry } from './events.js';
export { DEFAULT_BUCKET, KvContextStore, type KvStoreOptions } from './kv-store.js';
export { DEFAULT_PAGE_SIZE, listContexts } from './list.js';
export { PRESENCE_BOUNDS, Presence, type PresenceSnapshot } from './presence.js';
export { providerToolsOf, renderProviderTools } from './provider-formats.js';
export type * from './provider-tools.js';
export { DEFAULT_RESOLUTION_CACHE, Registry, type WritableToolContextStore } from './registry.js';
export { DEFAULT_TIMEOUT_MS, type ResolveOptions, resolveToolContext, unmetRequirements } from './resolver.js';
export {
  MCP_SEARCH_TOOL,
  MCP_SEARCH_TOOL_NAME,
  mcpListedTools,
  mcpSearches,
} from './search/mcp-view.js';
export {
  DEFAULT_DEFER_THRESHOLD,
  DEFAULT_SEARCH_LIMIT,
  type DeferOptions,
  deferredTools,
  defers,
  MAX_SEARCH_LIMIT,
  SEARCH_OP,
  SEARCH_TOOL,
  SEARCH_TOOL_NAME,
  toolReferences,
  toolSearchOutput,
} from './search/search-tool.js';
export { DEFAULT_SEARCH_TOOLS, ToolSearch } from './search/searcher.js';
export { SEARCH_OPTIONS, type SearchFound, type SearchHit, SessionIndex } from './search/session-index.js';
export {
  compareKeys,
  type LeftOutEntry,
  StaticStore,
  type StoreChange,
  type StoredContext,
  storedBuiltin,
  type ToolContextStore,
} from './store.js';
export { REGISTRY_VERSION, type RegistryMountOptions, registryMount } from './system-tools.js';
export { ToolProvider, type ToolProviderOptions } from './tool-provider.js';
export * from './types.js';
export {
  assertRegistrable,
  forbiddenParts,
  type RegistrationCheck,
  registrationError,
  reservedNames,
  reservedTargets,
  specViolations,
} from './validate.js';
