/**
 * What OpenTelemetry costs a tool call, in three modes of one in-process dispatcher:
 *
 *   (a) no observer: no telemetry hook runs (as shipped with no SDK registered);
 *   (b) the telemetry hook on (`telemetry: true`), no SDK registered: it runs and finds no provider;
 *   (c) the Node SDK registered (tracer and meter providers, a batching span processor and a
 *       metric reader that export nowhere): every call builds its span and metric points.
 *
 * Measured as CPU of this process per completed call (`process.cpuUsage`: the caller and the
 * dispatcher run here; the echo target and nats-server do the same work in every mode). (b)
 * and (a) run in short slices of equal length, alternating a-b-b-a, over many rounds; each
 * pair of rounds gives a ratio of (b) to (a) under the same load, and the figure is the median
 * of those ratios, so a burst of other work on a shared machine moves a few ratios, not the
 * result. (c) is measured the same way against (a) afterwards, in fewer rounds, so the SDK's
 * garbage is never collected during a slice of (b). Also timed: the observers alone on one
 * event, in ns per call.
 */
import { metrics, trace } from '@opentelemetry/api';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { BatchSpanProcessor, type ReadableSpan, type SpanExporter, TracerProvider } from '@opentelemetry/sdk-trace';
import type { CallEvent } from '../src/audit/events.js';
import { type CallObserver, callObservers } from '../src/audit/log.js';
import { newTraceparent } from '../src/bus/headers.js';
import { observeCall } from '../src/telemetry/calls.js';

/** The three modes, in the order (a), (b), (c). */
export const OTEL_MODES = ['no observer (hooks off)', 'OTel hook on, no SDK', 'OTel Node SDK registered'] as const;

/** What the OpenTelemetry rows measured. */
export interface OtelFigures {
  rounds: number;
  /** Median µs of this process's CPU per call, by mode. */
  cpuUs: number[];
  /** Median completed calls per second, by mode. */
  rps: number[];
  /** Median over each a-m-m-a quartet of slices of the mode's CPU per call ÷ (a)'s. */
  ratio: number[];
  /** Lowest and highest quartet ratio, by mode: how much the quartets disagree. */
  ratioRange: Array<[number, number]>;
  /** The observers alone, ns per call, by mode ((a) runs none: 0). */
  observerNs: number[];
}

/** A span exporter that drops what it is given (the SDK's work up to the wire is measured, not a collector's). */
class DroppingExporter implements SpanExporter {
  export(_spans: ReadableSpan[], done: Parameters<SpanExporter['export']>[1]): void {
    done({ code: 0 }); // ExportResultCode.SUCCESS
  }
  async shutdown(): Promise<void> {}
}

/** A metric reader nobody collects from: the instruments record as they would under a periodic exporter. */
class IdleReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

/** Switches the process between the modes; `restore` leaves it as shipped with no SDK (no hook). */
function modeSwitch(): { set(mode: number): void; restore(): Promise<void> } {
  const shipped: CallObserver[] = [observeCall];
  const tracerProvider = new TracerProvider({
    spanProcessors: [new BatchSpanProcessor({ exporter: new DroppingExporter() })],
  });
  const meterProvider = new MeterProvider({ readers: [new IdleReader()] });
  const set = (mode: number) => {
    callObservers.splice(0, callObservers.length, ...(mode === 0 ? [] : shipped));
    trace.disable();
    metrics.disable();
    if (mode === 2) {
      trace.setGlobalTracerProvider(tracerProvider);
      metrics.setGlobalMeterProvider(meterProvider);
    }
  };
  return {
    set,
    restore: async () => {
      set(0);
      await Promise.allSettled([tracerProvider.shutdown(), meterProvider.shutdown()]);
    },
  };
}

/** Runs `call` at `inFlight` for `seconds`: calls completed and this process's CPU in µs. */
async function slice(
  call: () => Promise<unknown>,
  inFlight: number,
  seconds: number,
): Promise<{ calls: number; cpuUs: number; seconds: number }> {
  let calls = 0;
  const started = performance.now();
  const end = started + seconds * 1000;
  const before = process.cpuUsage();
  const worker = async () => {
    while (performance.now() < end) {
      await call();
      calls++;
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  const used = process.cpuUsage(before);
  return { calls, cpuUs: used.user + used.system, seconds: (performance.now() - started) / 1000 };
}

/** The observers alone over one made-up call event, ns of CPU per call. */
function observerCost(n: number): number {
  const event: CallEvent = {
    callId: 'bench',
    name: 'echo',
    target: 'bench.echo',
    op: '$echo',
    session: 'bench',
    principal: undefined,
    traceparent: newTraceparent(),
    outcome: 'ok',
    code: undefined,
    durationMs: 0.5,
    attempts: 1,
    argumentsDigest: undefined,
    argumentsBytes: undefined,
    at: new Date().toISOString(),
  };
  const before = process.cpuUsage();
  for (let i = 0; i < n; i++) for (const observe of callObservers) observe(event);
  const used = process.cpuUsage(before);
  return ((used.user + used.system) * 1000) / n;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};

/** One slice's figures. */
interface Slice {
  cpuUs: number;
  rps: number;
}

/**
 * Slices of `modes` against (a): each round runs (a) and the mode, in that order in even
 * rounds and reversed in odd ones. Returns the slices of each mode by round.
 */
async function alternate(
  call: () => Promise<unknown>,
  set: (mode: number) => void,
  mode: number,
  inFlight: number,
  seconds: number,
  rounds: number,
) {
  const a: Slice[] = [];
  const other: Slice[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const m of round % 2 === 0 ? [0, mode] : [mode, 0]) {
      set(m);
      const s = await slice(call, inFlight, seconds);
      (m === 0 ? a : other).push({ cpuUs: s.cpuUs / s.calls, rps: s.calls / s.seconds });
    }
  }
  return { a, other };
}

/**
 * The ratio of the mode's CPU per call to (a)'s over each two rounds, which ran a-m-m-a: a
 * steady drift of the machine's load over those four slices weighs on both sides alike.
 */
function abbaRatios(a: Slice[], other: Slice[]): number[] {
  const ratios: number[] = [];
  for (let i = 0; i + 1 < a.length; i += 2) {
    ratios.push(
      ((other[i] as Slice).cpuUs + (other[i + 1] as Slice).cpuUs) / ((a[i] as Slice).cpuUs + (a[i + 1] as Slice).cpuUs),
    );
  }
  return ratios;
}

/**
 * Measures `call` in the three modes: (b) against (a) over `rounds` rounds, then (c) against
 * (a) over a third as many (the SDK's garbage never falls in a slice of (b)).
 */
export async function measureOtel(
  call: () => Promise<unknown>,
  inFlight: number,
  seconds: number,
  rounds: number,
): Promise<OtelFigures> {
  const modes = modeSwitch();
  try {
    for (const m of OTEL_MODES.keys()) {
      modes.set(m);
      await slice(call, inFlight, 0.3); // warm-up
    }
    const b = await alternate(call, modes.set, 1, inFlight, seconds, rounds);
    const c = await alternate(call, modes.set, 2, inFlight, seconds, Math.max(2, 2 * Math.round(rounds / 6)));
    const observerNs = OTEL_MODES.map((_, m) => {
      modes.set(m);
      return median(Array.from({ length: 5 }, () => observerCost(m === 2 ? 2_000 : 200_000)));
    });
    const ratios = [b.a.map(() => 1), abbaRatios(b.a, b.other), abbaRatios(c.a, c.other)];
    const slices = [b.a, b.other, c.other];
    return {
      rounds,
      cpuUs: slices.map((xs) => median(xs.map((s) => s.cpuUs))),
      rps: slices.map((xs) => median(xs.map((s) => s.rps))),
      ratio: ratios.map(median),
      ratioRange: ratios.map((xs) => [Math.min(...xs), Math.max(...xs)]),
      observerNs,
    };
  } finally {
    await modes.restore();
  }
}

/** The markdown section of RESULTS.md. */
export function otelSection(f: OtelFigures, inFlight: number, seconds: number): string[] {
  return [
    `## OpenTelemetry cost (in-process dispatch, audit on, ${inFlight} in flight)`,
    '',
    `CPU of the bench process (caller + dispatcher) per completed call. (a) and (b) alternate a-b-b-a in slices of ${seconds.toFixed(2)} s over ${f.rounds} rounds, then (a) and (c) likewise in a third as many; CPU and req/s are medians over the slices, the ratio the median over each a-m-m-a quartet of the mode's CPU ÷ (a)'s, with the lowest and highest quartet beside it. (a) is the dispatcher with no call observer (as shipped with no SDK); (b) the telemetry hook on, no SDK; (c) the tracer and meter providers of the SDK registered, spans batched to an exporter that drops them. The last column times the call observers alone on one event.`,
    '',
    '| mode | CPU µs per call | req/s | CPU ÷ (a) | lowest–highest | observer ns per call |',
    '|---|---|---|---|---|---|',
    ...OTEL_MODES.map(
      (mode, m) =>
        `| (${'abc'[m]}) ${mode} | ${f.cpuUs[m]?.toFixed(2)} | ${f.rps[m]?.toFixed(0)} | ${f.ratio[m]?.toFixed(3)} | ${f.ratioRange[m]?.map((x) => x.toFixed(3)).join('–')} | ${f.observerNs[m]?.toFixed(0)} |`,
    ),
    '',
  ];
}
