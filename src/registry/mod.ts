export { BuiltinKey, builtinContexts, builtinRefsFor, MATRIX_INVOKE } from './builtins.js';
export { canonicalJson, digestOf } from './canonical.js';
export { DEFAULT_PAGE_SIZE, listContexts } from './list.js';
export { Registry, REGISTRY_VERSION, registryMount, type RegistryMountOptions } from './mount.js';
export { renderProviderTools } from './providers.js';
export { DEFAULT_TIMEOUT_MS, resolveToolContext, unmetRequirements } from './resolver.js';
export { compareKeys, StaticStore, storedBuiltin, type StoredContext, type ToolContextStore } from './store.js';
export * from './types.js';
