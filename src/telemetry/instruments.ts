/**
 * The tracer and the metric instruments of the registry, through `@opentelemetry/api` only.
 * Each is looked up from the global providers on use and is undefined while no SDK is
 * registered, so callers skip building spans and attribute objects: with no SDK the cost of
 * a call's telemetry is two global look-ups.
 */
import {
  type Counter,
  createNoopMeter,
  type Histogram,
  type Meter,
  metrics,
  ProxyTracerProvider,
  type Tracer,
  type TracerProvider,
  trace,
} from '@opentelemetry/api';
import { cacheLookups } from './caches.js';
import { MAX_SERIES_PER_METRIC, OVERFLOW_TOOL } from './series.js';

/** The instrumentation scope of every span and metric. */
export const SCOPE = 'matrix-tool-registry';

/** Metric names, as OpenTelemetry names them (in Prometheus dots become `_` and counters end in `_total`). */
export const MetricName = {
  Calls: 'matrix.tool.calls',
  CallDuration: 'matrix.tool.call.duration',
  Approvals: 'matrix.approvals',
  Cancels: 'matrix.tool.cancels',
  InFlight: 'matrix.tool.calls.in_flight',
  CacheLookups: 'matrix.cache.lookups',
} as const;

/** The instruments, when a meter provider is registered. */
export interface Instruments {
  /** Tool calls by `gen_ai.tool.name`, `matrix.outcome` and `error.type`. */
  calls: Counter;
  /** Seconds from a call's arrival to its result, by tool and outcome. */
  callDuration: Histogram;
  /** Approval decisions by `matrix.decision` (`approve` | `reject`). */
  approvals: Counter;
  /** `<target>.$cancel` requests sent: a caller cancelled, or its deadline passed while the target worked. */
  cancels: Counter;
}

// The API's no-op provider and counter are not exported; these are the same singletons.
const NOOP_TRACER_PROVIDER = new ProxyTracerProvider().getDelegate();
const NOOP_COUNTER = createNoopMeter().createCounter('noop');

let tracerOf: TracerProvider | undefined;
let tracer: Tracer | undefined;

/** The registry's tracer, or undefined while no tracer provider is registered. */
export function activeTracer(): Tracer | undefined {
  const provider = trace.getTracerProvider();
  const delegate = provider instanceof ProxyTracerProvider ? provider.getDelegate() : provider;
  if (delegate === NOOP_TRACER_PROVIDER) return undefined;
  if (delegate !== tracerOf) {
    tracerOf = delegate;
    tracer = delegate.getTracer(SCOPE);
  }
  return tracer;
}

/** What in-flight counts are read from at each collection: maps of target → calls in flight. */
const inFlightSources = new Set<() => ReadonlyMap<string, number>>();

/**
 * Reports `read()`'s counts as the `matrix.tool.calls.in_flight` gauge by `matrix.target`, at
 * each metric collection (nothing is done per call); returns a function that stops.
 */
export function observeInFlight(read: () => ReadonlyMap<string, number>): () => void {
  inFlightSources.add(read);
  return () => inFlightSources.delete(read);
}

/**
 * Most targets the in-flight gauge reports over the process's life; the calls of others are summed
 * under `(overflow)`.
 */
const MAX_TARGETS_REPORTED = MAX_SERIES_PER_METRIC;
/** Targets the gauge has reported: each is reported every collection, at 0 when nothing is in flight. */
const targetsReported = new Set<string>();

/**
 * Calls in flight now, by target, summed over every source (two dispatchers calling one target
 * are one count), with 0 for a target reported before and idle now: a target left out of an
 * observation keeps its last value in a cumulative export, so a target whose calls ended
 * would show its last count forever.
 */
function inFlightByTarget(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const target of targetsReported) counts.set(target, 0);
  for (const read of inFlightSources) {
    for (const [target, n] of read()) {
      const label = targetsReported.has(target) || targetsReported.size < MAX_TARGETS_REPORTED ? target : OVERFLOW_TOOL;
      targetsReported.add(label);
      counts.set(label, (counts.get(label) ?? 0) + n);
    }
  }
  return counts;
}

/** Is an SDK registered now: a tracer provider or a meter provider other than the API's no-op one? */
export function telemetryRegistered(): boolean {
  return activeTracer() !== undefined || activeInstruments() !== undefined;
}

let instrumentsOf: unknown;
let instruments: Instruments | undefined;
/**
 * The instruments made for each meter provider seen (none for a no-op one), so re-registering one
 * adds no second callback.
 */
const made = new WeakMap<object, Instruments | null>();

/** The registry's instruments, or undefined while no meter provider is registered. */
export function activeInstruments(): Instruments | undefined {
  const provider = metrics.getMeterProvider();
  if (provider === instrumentsOf) return instruments;
  instrumentsOf = provider;
  let found = made.get(provider);
  if (found === undefined) {
    found = makeInstruments(provider.getMeter(SCOPE)) ?? null;
    made.set(provider, found);
  }
  instruments = found ?? undefined;
  return instruments;
}

/** The instruments of `meter`, with the gauges read at collection; undefined for a no-op meter. */
function makeInstruments(meter: Meter): Instruments | undefined {
  const calls = meter.createCounter(MetricName.Calls, {
    description: 'Tool calls through the dispatcher, by tool and outcome.',
    unit: '{call}',
  });
  if (calls === NOOP_COUNTER) return undefined;
  meter
    .createObservableUpDownCounter(MetricName.InFlight, {
      description: 'Tool calls waiting for their target, by target.',
      unit: '{call}',
    })
    .addCallback((result) => {
      for (const [target, n] of inFlightByTarget()) result.observe(n, { 'matrix.target': target });
    });
  meter
    .createObservableCounter(MetricName.CacheLookups, {
      description: 'Lookups of the resolution, session and grant caches, by cache and result (hit or miss).',
      unit: '{lookup}',
    })
    .addCallback((result) => {
      for (const [cache, count] of Object.entries(cacheLookups)) {
        result.observe(count.hit, { 'matrix.cache': cache, 'matrix.cache.result': 'hit' });
        result.observe(count.miss, { 'matrix.cache': cache, 'matrix.cache.result': 'miss' });
      }
    });
  return {
    calls,
    callDuration: meter.createHistogram(MetricName.CallDuration, {
      description: 'Time from a tool call to its result.',
      unit: 's',
      advice: {
        explicitBucketBoundaries: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      },
    }),
    approvals: meter.createCounter(MetricName.Approvals, {
      description: 'Approval decisions of gated tool calls.',
      unit: '{decision}',
    }),
    cancels: meter.createCounter(MetricName.Cancels, {
      description: 'Cancels sent to targets still working on a call its caller gave up.',
      unit: '{cancel}',
    }),
  };
}
