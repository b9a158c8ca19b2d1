/**
 * Drives operations at a fixed number of calls in flight and reports latency and
 * throughput. Scenarios are measured in interleaved rounds, so that drift on a shared
 * machine (other processes, frequency changes) falls on every scenario alike.
 */

/** What one scenario at one concurrency measured; p50 and p99 in µs. */
export interface Figures {
  p50: number;
  p99: number;
  /** Completed operations per second. */
  rps: number;
  errors: number;
}

/** Samples gathered over the rounds of one scenario at one concurrency. */
class Samples {
  latencies: number[] = [];
  seconds = 0;
  errors = 0;

  figures(): Figures {
    const sorted = [...this.latencies].sort((a, b) => a - b);
    const at = (q: number) => (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN) * 1000;
    return { p50: at(0.5), p99: at(0.99), rps: sorted.length / this.seconds, errors: this.errors };
  }
}

/** Measures every operation at `inFlight`, in `rounds` interleaved slices of `seconds / rounds`. */
export async function measureInterleaved(
  ops: ReadonlyArray<() => Promise<unknown>>,
  inFlight: number,
  seconds: number,
  rounds: number,
): Promise<Figures[]> {
  const samples = ops.map(() => new Samples());
  for (const op of ops) await run(op, inFlight, 0.3, new Samples()); // warm-up
  for (let round = 0; round < rounds; round++) {
    for (const [i, op] of ops.entries()) await run(op, inFlight, seconds / rounds, samples[i] as Samples);
  }
  return samples.map((s) => s.figures());
}

async function run(op: () => Promise<unknown>, inFlight: number, seconds: number, into: Samples): Promise<void> {
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
}
