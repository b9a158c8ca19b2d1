export {
  ArgumentValidators,
  argumentName,
  argumentsMessage,
  type ParsedArguments,
  parseArguments,
  readArguments,
} from './arguments.js';
export { Dispatcher, type DispatcherOptions, type EarlyRefusal } from './dispatcher.js';
export { type RetryPolicy, retryDelay, TargetSlots } from './forward.js';
export { CallFailure, errorResult, failure, targetFailed } from './results.js';
export { isInvokeTool, type Route, route } from './route.js';
export {
  busToolSource,
  indexSession,
  localToolSource,
  type Session,
  SessionCache,
  type SessionCacheOptions,
  type ToolSource,
} from './session-cache.js';
export {
  capContent,
  DEFAULT_CONTENT_CAP,
  type Shaped,
  type ShapeOptions,
  shapeReply,
  structuredObject,
  structuredTravels,
} from './shape.js';
export { acceptsNull, withoutStrictNulls } from './strict-nulls.js';
export { DEFAULT_SUMMARY_BUDGET, summarize } from './summary.js';
export { DISPATCHER_VERSION, type DispatcherMountOptions, dispatcherMount } from './system-dispatcher.js';
export * from './types.js';
