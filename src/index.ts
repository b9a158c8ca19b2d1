/** The public API of the package: the bus runtime, the contracts and the registry. */
export * from './bus/mod.js';
export { type Check, Contracts, contracts, contractsDir, SchemaId, violationsOf } from './contracts/schemas.js';
export * from './dispatcher/mod.js';
export * from './mounts/mod.js';
export * from './registry/mod.js';
export * from './telemetry/mod.js';
