/** The container tier: the harness's engine cases and the compose stack; each test starts what it needs. */
import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

export default defineConfig({
  test: {
    ...base.test,
    include: ['test/containers/**/*.test.ts'],
    exclude: ['**/node_modules/**'],
    globalSetup: [],
  },
});
