import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The container tier needs a container engine: `npm run test:containers` (vitest.containers.config.ts).
    exclude: [...configDefaults.exclude, 'test/containers/**'],
    globalSetup: ['test/harness/global-setup.ts'],
    reporters: ['default', './test/harness/summary-reporter.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Integration files each mount system.tools on the shared server: one file at a time.
    fileParallelism: false,
  },
});
