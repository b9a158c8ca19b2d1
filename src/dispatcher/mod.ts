export { approvalGate, DECIDE_OP, type Verdict } from './approval.js';
export { ArgumentValidators, argumentName, argumentsMessage, type ParsedArguments, parseArguments } from './arguments.js';
export { AuditLog, CALL_EVENTS, type CallObserver, callObservers, watchCalls } from './audit.js';
export { Dispatcher, type DispatcherOptions } from './dispatcher.js';
export { DISPATCHER_VERSION, type DispatcherMountOptions, dispatcherMount } from './mount.js';
export { busToolSource, indexSession, localToolSource, type Session, SessionCache, type SessionCacheOptions, type ToolSource } from './sessions.js';
export { capContent, DEFAULT_CONTENT_CAP, type Shaped, type ShapeOptions, shapeReply } from './shape.js';
export { DEFAULT_SUMMARY_BUDGET, summarize } from './summary.js';
export * from './types.js';
