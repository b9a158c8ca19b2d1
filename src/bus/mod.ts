export { BoundedCache, type CacheBounds } from './bounded-cache.js';
export { BusClient, type BusClientOptions, type RawReply, type RequestOptions } from './client.js';
export {
  decodeBody,
  decodeMap,
  decodeReply,
  decodeUnlabelled,
  Encoded,
  Encoding,
  encodeBody,
  encodedOnce,
  JSON_CONTENT_TYPE,
  jsonTextDeeperThan,
  MAX_DEPTH,
  MAX_SESSION_REQUEST_CHARS,
  nestedDeeperThan,
  sessionKey,
  sha256Hex,
} from './codec.js';
export { type CheckOptions, type CheckOutcome, checkConformance } from './conformance.js';
export { type ConnectOptions, connectBus, connectOptionsFromEnv, DEFAULT_NATS_URL } from './connect.js';
export { type CallContext, CancelledError, type Progress } from './context.js';
export { type EndpointStats, pingServices, type ServiceInfo } from './discovery.js';
export {
  BadRequestError,
  ConflictError,
  ConnectionLostError,
  type ErrorBody,
  ErrorCode,
  type ErrorDetails,
  errorFromWire,
  errorStatus,
  ForbiddenError,
  InternalError,
  MatrixError,
  NoRespondersError,
  NotFoundError,
  PayloadTooLargeError,
  TimeoutError,
  UnavailableError,
  UnsendableRequestError,
  type Violation,
} from './errors.js';
export { subscribeEventData, subscribeEvents } from './events.js';
export {
  deadlineOf,
  Header,
  newTraceparent,
  OutgoingHeaders,
  type RequestHeaders,
  readContext,
  readRequestHeaders,
  traceIdOf,
  writeContext,
} from './headers.js';
export { Bucket, type BucketEntry, type BucketOptions, type BucketWatch, type WatchTiming } from './kv.js';
export { type Logger, silentLogger, stderrLogger } from './log.js';
export {
  type AnyOpSpec,
  Mount,
  type MountOptions,
  type OpContext,
  type OpSpec,
  RequestContext,
  type SchemaRef,
} from './mount.js';
export { ApiLevel, featuresOf, type JetStreamFeatures, jetStreamFeatures } from './server-features.js';
export {
  type DurableOptions,
  type StreamLimits,
  type StreamMessage,
  StreamStore,
} from './stream-store.js';
export { StreamWriter } from './stream-writer.js';
export {
  eventSubject,
  indexShardFilter,
  indexShardSubject,
  indexStreamName,
  indexSubjects,
  isInboxSubject,
  isReservedSubject,
  Mounts,
  mountWildcard,
  opSubject,
  queueGroup,
  reservedPatterns,
  serviceName,
  subjectMatches,
} from './subjects.js';
