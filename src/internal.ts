/**
 * Everything the package has, the public API included: the codec, headers, subjects, caches,
 * validators and the pieces of the pipeline. For this repository's tests, benches and tools;
 * names here may change without notice. Applications import `matrix-tool-registry`.
 */
export * from './approvals/mod.js';
export * from './audit/mod.js';
export { type Check, Contracts, contracts, contractsDir, SchemaId, violationsOf } from './bus/contracts.js';
export * from './bus/mod.js';
export * from './dispatcher/mod.js';
export * from './identity/mod.js';
export * from './oracle/mod.js';
export * from './reference-mounts/mod.js';
export * from './registry/mod.js';
export * from './tasks/mod.js';
export * from './telemetry/mod.js';
