/** The public API of the package: the bus runtime, the contracts and the registry. */
export * from './bus/mod.js';
export { Contracts, contracts, contractsDir, SchemaId, violationsOf, type Check } from './contracts/schemas.js';
export * from './registry/mod.js';
export * from './dispatcher/mod.js';
export * from './mounts/mod.js';
