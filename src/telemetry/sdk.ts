/**
 * The OpenTelemetry SDK as `matrix-tools serve` registers it: spans and metrics to an OTLP/HTTP
 * collector when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, metrics in the Prometheus text format
 * when a metrics port is given. Library code never imports this; it only uses the API.
 */
import { metrics, trace } from '@opentelemetry/api';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider, type MetricReader, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { activeInstruments, SCOPE } from './instruments.js';

/** What to export. */
export interface TelemetryOptions {
  /** OTLP/HTTP endpoint (the exporters add `/v1/traces`, `/v1/metrics`); default `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  otlpEndpoint?: string;
  /** Port of the Prometheus `/metrics` endpoint; none by default. */
  metricsPort?: number;
  /** Host the metrics endpoint listens on; default all interfaces. */
  metricsHost?: string;
  /** How often spans (default 5000) and metrics (default 10000) are pushed over OTLP, in ms. */
  exportIntervalMs?: number;
}

/** A registered SDK. */
export interface Telemetry {
  /** What it exports to, for the ready line. */
  readonly description: string;
  /** Flushes what is pending and unregisters. */
  shutdown(): Promise<void>;
}

/** Registers the SDK for what `options` ask; undefined (nothing registered, no cost) when they ask for nothing. */
export async function startTelemetry(options: TelemetryOptions = {}): Promise<Telemetry | undefined> {
  const endpoint = options.otlpEndpoint ?? process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint && options.metricsPort === undefined) return undefined;
  const port = options.metricsPort;
  if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port <= 65535))
    throw new RangeError(`--metrics-port must be a port number (0-65535), not ${port}`);
  const resource = resourceFromAttributes({ 'service.name': process.env.OTEL_SERVICE_NAME || SCOPE });
  const readers: MetricReader[] = [];
  const parts: string[] = [];
  let tracerProvider: TracerProvider | undefined;
  if (endpoint) {
    const base = endpoint.replace(/\/$/, '');
    tracerProvider = new TracerProvider({
      resource,
      spanProcessors: [
        new BatchSpanProcessor({
          exporter: new OTLPTraceExporter({ url: `${base}/v1/traces` }),
          scheduledDelayMillis: options.exportIntervalMs ?? 5000,
        }),
      ],
    });
    trace.setGlobalTracerProvider(tracerProvider);
    readers.push(
      new PeriodicExportingMetricReader({
        exporter: new OTLPMetricExporter({ url: `${base}/v1/metrics` }),
        exportIntervalMillis: options.exportIntervalMs ?? 10_000,
      }),
    );
    parts.push(`OTLP ${base}`);
  }
  if (options.metricsPort !== undefined) {
    const prometheus = new PrometheusExporter({
      port: options.metricsPort,
      host: options.metricsHost,
      preventServerStart: true,
    });
    await prometheus.startServer().catch((err: Error) => {
      throw new Error(`cannot serve metrics on port ${options.metricsPort}: ${err.message}`, { cause: err });
    });
    readers.push(prometheus);
    parts.push(`metrics on :${options.metricsPort}/metrics`);
  }
  const meterProvider = new MeterProvider({ resource, readers });
  metrics.setGlobalMeterProvider(meterProvider);
  // The instruments exist from the start: a scrape before the first call shows them.
  activeInstruments();
  return {
    description: parts.join(', '),
    async shutdown() {
      await Promise.allSettled([tracerProvider?.shutdown(), meterProvider.shutdown()]);
      trace.disable();
      metrics.disable();
    },
  };
}
