/** Steady load for resilience tests: N callers in a loop, every call recorded. */
import { MatrixError } from '../../src/bus/errors.js';

/** One call: when it started and ended (performance.now ms) and how it ended. */
export interface CallRecord {
  started: number;
  ended: number;
  ok: boolean;
  code?: string;
}

/** A running load; `stop()` ends it and resolves with every call. */
export interface Load {
  records: CallRecord[];
  stop(): Promise<CallRecord[]>;
}

/** Starts `inFlight` callers of `op`; each call that throws is recorded with its error code. */
export function startLoad(op: () => Promise<unknown>, inFlight: number): Load {
  const records: CallRecord[] = [];
  let running = true;
  const worker = async () => {
    while (running) {
      const started = performance.now();
      try {
        await op();
        records.push({ started, ended: performance.now(), ok: true });
      } catch (err) {
        records.push({
          started,
          ended: performance.now(),
          ok: false,
          code: err instanceof MatrixError ? err.code : (err as Error).name,
        });
        await new Promise((r) => setTimeout(r, 5)); // no hot loop while a server is away
      }
    }
  };
  const workers = Array.from({ length: inFlight }, worker);
  return {
    records,
    stop: async () => {
      running = false;
      await Promise.all(workers);
      return records;
    },
  };
}

/**
 * How many calls a system test watches at each stage (warm-up, after a failure) before it
 * judges: `SYSTEM_TEST_CALLS`, default 200 (enough for its ≥ 99 % checks to mean something).
 * Raise it for a longer, harder run.
 */
export const STAGE_CALLS = Number(process.env.SYSTEM_TEST_CALLS) || 200;

/** The calls of `load` that `pick` selects and that succeeded. */
export const okCalls = (load: Load, pick: (r: CallRecord) => boolean = () => true): number =>
  load.records.filter((r) => r.ok && pick(r)).length;
