import { defineConfig } from 'vitest/config';

/**
 * Three tiers, run in this order by `vitest run` (npm test); each can run alone:
 * - unit: no shared server, files in parallel (`npm run test:unit`, the inner loop);
 * - integration: in-process mounts on the run's shared NATS server, one file at a time
 *   (each mounts system.tools on it);
 * - system: built processes as a user runs them, killed servers, clusters, fuzzing; sized by
 *   env (FUZZ_ROUNDS, …), one file at a time (`npm run test:system`, after a build).
 * The container tier (test/containers: the harness's engine cases, the compose stack) runs
 * alone, where a container engine answers: `npm run test:containers`.
 */
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
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts', 'test/console/**/*.test.ts'], sequence: { groupOrder: 0 } } },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          exclude: system,
          globalSetup: ['test/harness/global-setup.ts'],
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: { name: 'system', include: system, globalSetup: ['test/harness/global-setup.ts'], fileParallelism: false, sequence: { groupOrder: 2 } },
      },
    ],
  },
});
