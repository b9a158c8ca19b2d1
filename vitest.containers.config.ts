/** The container tier: the integration tests on a NATS container, the harness's engine cases, the compose stack. */
import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

export default defineConfig({
  test: {
    ...base.test,
    include: ['test/integration/**/*.test.ts', 'test/containers/**/*.test.ts'],
    exclude: ['**/node_modules/**'],
  },
});
