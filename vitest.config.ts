import { defineConfig } from 'vitest/config';
import { testLanes } from './test/harness/lanes.js';
import LongestFirst from './test/harness/sequencer.js';

/**
 * Three tiers (`npm test` runs them all); each can run alone:
 * - unit: no shared server, files in parallel (`npm run test:unit`, the inner loop);
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
const laned = {
  globalSetup: ['test/harness/global-setup.ts'],
  setupFiles: ['test/harness/file-setup.ts'],
  maxWorkers: lanes,
  sequence: { groupOrder: 1 },
};

const system = [
  'test/integration/audit-trail.test.ts',
  'test/integration/prometheus.test.ts',
  'test/integration/telemetry.test.ts',
  'test/browser/**/*.test.ts',
  'test/integration/cluster.test.ts',
  'test/integration/e2e.test.ts',
  'test/integration/example.test.ts',
  'test/integration/fuzz.test.ts',
  'test/integration/identity-cli.test.ts',
  'test/integration/identity-fuzz.test.ts',
  'test/integration/identity.test.ts',
  'test/integration/registration-memory.test.ts',
  'test/integration/resilience.test.ts',
  'test/integration/security.test.ts',
  'test/integration/service.test.ts',
];

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
          maxWorkers: lanes,
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          exclude: system,
          ...laned,
        },
      },
      {
        extends: true,
        test: { name: 'system', include: system, ...laned },
      },
    ],
  },
});
