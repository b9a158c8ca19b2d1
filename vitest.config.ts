import { defineConfig } from 'vitest/config';
import { testLanes } from './test/harness/lanes.js';
import LongestFirst from './test/harness/sequencer.js';

/**
 * Three tiers (`npm test` runs them all); each can run alone:
 * - unit: no shared server, files in parallel, sharing each worker's imports; unit-isolated: the
 *   few that need a worker of their own (`npm run test:unit` runs both: the inner loop);
 * - integration: in-process mounts on a shared NATS server (each file mounts system.tools on it);
 * - system: built processes as a user runs them, killed servers, clusters, fuzzing; sized by
 *   env (FUZZ_ROUNDS, …) (`npm run test:system`, after a build).
 * All three run together, `TEST_LANES` files at once (default 2; see test/harness/lanes.ts),
 * the longest first (test/harness/sequencer.ts), so that short unit files fill the tail: each
 * lane has its own shared server, on which one file at a time runs (a unit file uses none),
 * and no integration or system file leaves a process running.
 * The container tier (test/containers: the harness's engine cases, the compose stack) runs
 * alone, where a container engine answers: `npm run test:containers`.
 */
const lanes = testLanes();
/**
 * Unit files that need a worker of their own: a module mock (`vi.mock`), and V8 coverage of
 * the whole process (what another file left running would be counted).
 */
const OWN_WORKER = ['test/unit/grant-refusals.test.ts', 'test/unit/call-path.test.ts'];
const laned = {
  globalSetup: ['test/harness/global-setup.ts'],
  setupFiles: ['test/harness/file-setup.ts'],
  maxWorkers: lanes,
  sequence: { groupOrder: 1 },
};

export default defineConfig({
  test: {
    reporters: ['default', './test/harness/summary-reporter.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    pool: 'forks',
    sequence: { sequencer: LongestFirst },
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts', 'test/console/**/*.test.ts'],
          exclude: OWN_WORKER,
          // A worker imports the sources once for all its files (half the tier's CPU was imports):
          // a unit file leaves no global state behind (timers, observers, providers restored).
          isolate: false,
          maxWorkers: lanes,
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: { name: 'unit-isolated', include: OWN_WORKER, maxWorkers: lanes, sequence: { groupOrder: 1 } },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          ...laned,
        },
      },
      {
        extends: true,
        test: { name: 'system', include: ['test/system/**/*.test.ts'], ...laned },
      },
    ],
  },
});
