export { type CacheName, cacheLookups, type LookupCount } from './caches.js';
export { Attr, countApproval, type ObservedCall, observeCall, parentContext, traceResolve } from './calls.js';
export {
  activeInstruments,
  activeTracer,
  type Instruments,
  MetricName,
  observeInFlight,
  SCOPE,
  telemetryRegistered,
} from './instruments.js';
export { startTelemetry, type Telemetry, type TelemetryOptions } from './sdk.js';
