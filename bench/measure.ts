/**
 * Drives operations at a fixed number of calls in flight and reports latency and
 * throughput. Scenarios are measured in interleaved rounds, so that drift on a shared
 * machine (other processes, frequency changes) falls on every scenario alike.
 */

import { readFileSync } from 'node:fs';

/** What one scenario at one concurrency measured; p50 and p99 in µs. */
export interface Figures {
  p50: number;
  p99: number;
  /** Completed operations per second. */
  rps: number;
  errors: number;
  /** CPU time per completed operation, in µs, by process (when a CPU probe was given). */
  cpu?: Record<string, number>;
}

/** Cumulative CPU time in µs of each process measured, by name. */
export type CpuProbe = () => Record<string, number>;

/** Samples gathered over the rounds of one scenario at one concurrency. */
class Samples {
  latencies: number[] = [];
  seconds = 0;
  errors = 0;
  cpu: Record<string, number> | undefined;

  figures(): Figures {
    const sorted = [...this.latencies].sort((a, b) => a - b);
    const at = (q: number) => (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN) * 1000;
    const figures: Figures = { p50: at(0.5), p99: at(0.99), rps: sorted.length / this.seconds, errors: this.errors };
    if (this.cpu !== undefined)
      figures.cpu = Object.fromEntries(Object.entries(this.cpu).map(([name, us]) => [name, us / sorted.length]));
    return figures;
  }
}

/**
 * Measures every operation at `inFlight`, in `rounds` interleaved slices of `seconds / rounds`.
 * CPU is read `settleMs` after a slice's last call: what the slice left behind is its own.
 */
export async function measureInterleaved(
  ops: ReadonlyArray<() => Promise<unknown>>,
  inFlight: number,
  seconds: number,
  rounds: number,
  cpu?: CpuProbe,
  settleMs = 0,
): Promise<Figures[]> {
  const samples = ops.map(() => new Samples());
  for (const op of ops) await run(op, inFlight, 0.3, new Samples()); // warm-up
  for (let round = 0; round < rounds; round++) {
    for (const [i, op] of ops.entries())
      await run(op, inFlight, seconds / rounds, samples[i] as Samples, cpu, settleMs);
  }
  return samples.map((s) => s.figures());
}

async function run(
  op: () => Promise<unknown>,
  inFlight: number,
  seconds: number,
  into: Samples,
  cpu?: CpuProbe,
  settleMs = 0,
): Promise<void> {
  const before = cpu?.();
  const started = performance.now();
  const end = started + seconds * 1000;
  const worker = async () => {
    while (performance.now() < end) {
      const t = performance.now();
      try {
        await op();
        into.latencies.push(performance.now() - t);
      } catch {
        into.errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  into.seconds += (performance.now() - started) / 1000;
  if (cpu !== undefined && before !== undefined) {
    if (settleMs > 0) await new Promise((resolve) => setTimeout(resolve, settleMs));
    const after = cpu();
    into.cpu ??= {};
    for (const name of Object.keys(after))
      into.cpu[name] = (into.cpu[name] ?? 0) + (after[name] as number) - (before[name] ?? 0);
  }
}

/** Linux reports process CPU in clock ticks of 1/100 s. */
const CLOCK_TICKS = 100;

/** CPU time in µs a process has used so far (Linux `/proc`); NaN where it cannot be read. */
export function processCpu(pid: number | undefined | null): number {
  if (pid === undefined || pid === null) return NaN;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return (Number(fields[11]) + Number(fields[12])) * (1e6 / CLOCK_TICKS);
  } catch {
    return NaN;
  }
}

/** The median of `values` (NaN for none). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/** Median ms of `op` at 1 in flight over `samples` calls, after `warmups` unmeasured ones. */
export async function latencyP50(op: () => Promise<unknown>, samples: number, warmups = 5): Promise<number> {
  for (let k = 0; k < warmups; k++) await op();
  const times: number[] = [];
  for (let k = 0; k < samples; k++) {
    const t = performance.now();
    await op();
    times.push(performance.now() - t);
  }
  return median(times);
}
