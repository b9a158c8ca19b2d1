/** The audit trail: every call's event, written, stored in JetStream, indexed by trace id and queried. */
export { AuditLog, CALL_EVENTS, type CallObserver, callObservers, watchCalls } from './log.js';
export { type BatchSource, queryBatches, type TraceQueryReply } from './query.js';
export {
  DEFAULT_REFUSAL_BURST,
  DEFAULT_REFUSALS_PER_MINUTE,
  RefusalBudget,
  type RefusalBudgetOptions,
} from './refusals.js';
export { AuditStream, type AuditStreamOptions, eventsOfBatch, type StoredBatch } from './stream.js';
