export { approvalGate, DECIDE_OP, type Verdict } from './approval.js';
export { argumentName, argumentsMessage, ArgumentValidators, parseArguments, type ParsedArguments } from './arguments.js';
export { AuditLog, CALL_EVENTS, watchCalls } from './audit.js';
export { Dispatcher, type DispatcherOptions } from './dispatcher.js';
export { DISPATCHER_VERSION, dispatcherMount, type DispatcherMountOptions } from './mount.js';
export { busToolSource, indexSession, localToolSource, SessionCache, type Session, type SessionCacheOptions, type ToolSource } from './sessions.js';
export { capContent, DEFAULT_CONTENT_CAP, shapeReply, type Shaped, type ShapeOptions } from './shape.js';
export { DEFAULT_SUMMARY_BUDGET, summarize } from './summary.js';
export * from './types.js';
