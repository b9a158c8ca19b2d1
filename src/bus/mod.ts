export { BusClient, type BusClientOptions, type RawReply, type RequestOptions } from './client.js';
export { decodeBody, decodeMap, Encoded, encodedOnce, encodeBody, Encoding, JSON_CONTENT_TYPE } from './codec.js';
export { connectBus, connectOptionsFromEnv, DEFAULT_NATS_URL, type ConnectOptions } from './connect.js';
export { deadlineOf, Header, newTraceparent, OutgoingHeaders, readContext, readRequestHeaders, traceIdOf, writeContext, type CallContext, type RequestHeaders } from './context.js';
export { discover, pingServices, type EndpointStats, type ServiceInfo } from './discovery.js';
export {
  BadRequestError,
  ConflictError,
  ErrorCode,
  errorFromWire,
  errorStatus,
  ForbiddenError,
  InternalError,
  MatrixError,
  NotFoundError,
  PayloadTooLargeError,
  TimeoutError,
  UnavailableError,
  type ErrorBody,
  type ErrorDetails,
  type Violation,
} from './errors.js';
export { silentLogger, stderrLogger, type Logger } from './log.js';
export { Mount, type MountOptions, type OpContext, type OpSpec, type SchemaRef } from './mount.js';
export {
  eventSubject,
  isReservedSubject,
  Mounts,
  mountWildcard,
  opSubject,
  queueGroup,
  reservedPatterns,
  serviceName,
  subjectMatches,
} from './subjects.js';
export { Bucket, type BucketEntry, type BucketOptions, type BucketWatch, type WatchTiming } from './kv.js';
export { subscribeEvents } from './events.js';
