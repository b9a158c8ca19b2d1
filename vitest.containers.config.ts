/** The container tier: the harness's engine cases and the compose stack; each test starts what it needs. */
import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

const { reporters, testTimeout, hookTimeout, pool } = base.test ?? {};

export default defineConfig({
  test: {
    reporters,
    testTimeout,
    hookTimeout,
    pool,
    include: ['test/containers/**/*.test.ts'],
    // One stack or engine at a time: they share the container engine and its ports.
    fileParallelism: false,
  },
});
