export {
  ArgumentValidators,
  acceptsNull,
  argumentName,
  argumentsMessage,
  type ParsedArguments,
  parseArguments,
  readArguments,
  withoutStrictNulls,
} from './arguments.js';
export { Dispatcher, type DispatcherOptions, type RefusedCall } from './dispatcher.js';
export { CallFailure, errorResult, failure, targetFailed } from './results.js';
export { isInvokeTool, type RetryPolicy, type Route, retryDelay, route, TargetSlots } from './route.js';
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
  DEFAULT_SUMMARY_BUDGET,
  type Shaped,
  type ShapeOptions,
  shapeReply,
  structuredObject,
  structuredTravels,
  summarize,
} from './shape.js';
export { DISPATCHER_VERSION, type DispatcherMountOptions, dispatcherMount } from './system-dispatcher.js';
export * from './types.js';
