/** The audit trail: every call's event, written, stored in JetStream, indexed by trace id and queried. */
export {
  type CallEvent,
  decodeCallEvents,
  encodeCallEvents,
  eventsIn,
  newCallEvent,
  type RefusalSummary,
  traceIdsOfBatch,
} from './events.js';
export { encodeEntries, mergeEntries, PendingEntries, seqsIn } from './index-entries.js';
export { ensureIndexer, INDEXER, MERGE_AT, mergeShard, TraceIndexer, type TraceIndexerOptions } from './indexer.js';
export {
  AuditLog,
  CALL_EVENTS,
  type CallObserver,
  callObservers,
  isoNow,
  observeWithTelemetry,
  watchCalls,
} from './log.js';
export {
  type BatchSource,
  OVERFLOW_CURSOR,
  type QueryWatch,
  queryBatches,
  queryTrail,
  type TraceQuery,
  type TraceQueryReply,
  type TrailSource,
} from './query.js';
export {
  DEFAULT_REFUSAL_BURST,
  DEFAULT_REFUSALS_PER_MINUTE,
  REFUSALS,
  RefusalAudit,
  RefusalBudget,
  type RefusalBudgetOptions,
} from './refusals.js';
export { type IndexMessage, readShard, readTraceIndex } from './shard-reader.js';
export { isTraceId, SHARDS, Shards } from './shards.js';
export { AuditStream, type AuditStreamOptions, type StoredBatch } from './stream.js';
export { TraceBuffer } from './trace-buffer.js';
