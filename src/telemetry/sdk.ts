/**
 * The OpenTelemetry SDK as `matrix-tools serve` registers it: spans and metrics to an OTLP/HTTP
 * collector when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, metrics in the Prometheus text format
 * when a metrics port is given (on 127.0.0.1 unless told, behind a bearer token when one is
 * set). Library code never imports this; it only uses the API.
 */
import { timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { metrics, trace } from '@opentelemetry/api';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider, type MetricReader, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { loopbackHosts } from '../loopback.js';
import { activeInstruments, SCOPE } from './instruments.js';

/** What to export. */
export interface TelemetryOptions {
  /** OTLP/HTTP endpoint (the exporters add `/v1/traces`, `/v1/metrics`); default `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  otlpEndpoint?: string;
  /** Port of the Prometheus `/metrics` endpoint; none by default. */
  metricsPort?: number;
  /** Host the metrics endpoint listens on; default `127.0.0.1` (this machine only). */
  metricsHost?: string;
  /** A bearer token `/metrics` demands (`Authorization: Bearer <token>`); none by default. */
  metricsToken?: string;
  /** How often spans (default 5000) and metrics (default 10000) are pushed over OTLP, in ms. */
  exportIntervalMs?: number;
}

/** Where `/metrics` listens unless told: this machine only. */
export const DEFAULT_METRICS_HOST = '127.0.0.1';

/**
 * The `/metrics` endpoint: GET `/metrics` only, and with a token only for a request that
 * bears it (compared in constant time); on a loopback address only for a `Host` that names it
 * (421 otherwise: a DNS-rebinding page cannot read it); anything else is 401 or 404 and costs
 * no collection.
 */
function serveMetrics(
  prometheus: PrometheusExporter,
  port: number,
  host: string,
  token: string | undefined,
): Promise<Server> {
  const expected = token ? Buffer.from(`Bearer ${token}`) : undefined;
  let hosts: ReadonlySet<string> | undefined;
  const server = createServer((request, response) => {
    if (hosts !== undefined && !hosts.has(request.headers.host ?? '')) {
      response.writeHead(421).end();
      return;
    }
    if (request.method !== 'GET' || request.url?.split('?', 1)[0] !== '/metrics') {
      response.writeHead(404).end();
      return;
    }
    if (expected !== undefined) {
      const given = Buffer.from(request.headers.authorization ?? '');
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
        response.writeHead(401, { 'WWW-Authenticate': 'Bearer' }).end();
        return;
      }
    }
    prometheus.getMetricsRequestHandler(request, response);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      hosts = loopbackHosts(host, (server.address() as AddressInfo).port);
      resolve(server);
    });
  });
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
  let metricsServer: Server | undefined;
  if (options.metricsPort !== undefined) {
    const prometheus = new PrometheusExporter({ preventServerStart: true });
    const host = options.metricsHost ?? DEFAULT_METRICS_HOST;
    metricsServer = await serveMetrics(prometheus, options.metricsPort, host, options.metricsToken).catch(
      (err: Error) => {
        throw new Error(`cannot serve metrics on port ${options.metricsPort}: ${err.message}`, { cause: err });
      },
    );
    readers.push(prometheus);
    parts.push(`metrics on ${host}:${options.metricsPort}/metrics${options.metricsToken ? ' (bearer token)' : ''}`);
  }
  const meterProvider = new MeterProvider({ resource, readers });
  metrics.setGlobalMeterProvider(meterProvider);
  // The instruments exist from the start: a scrape before the first call shows them.
  activeInstruments();
  return {
    description: parts.join(', '),
    async shutdown() {
      await Promise.allSettled([
        tracerProvider?.shutdown(),
        meterProvider.shutdown(),
        new Promise((resolve) => (metricsServer === undefined ? resolve(undefined) : metricsServer.close(resolve))),
      ]);
      trace.disable();
      metrics.disable();
    },
  };
}
