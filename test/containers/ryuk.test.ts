/**
 * An engine without the Ryuk image (offline, a registry mirror, podman): testcontainers starts
 * Ryuk before any container and fails; the suite must run all the same, on a process.
 * Its own file: testcontainers reads the Ryuk settings once per process, when first imported.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { connectBus } from '../../src/bus/connect.js';
import { startTestNats, type TestNats } from '../harness/nats-server.js';

process.env.TESTCONTAINERS_RYUK_DISABLED = 'false';
process.env.RYUK_CONTAINER_IMAGE = 'localhost/matrix-no-such-ryuk:0';

describe('the test harness on an engine that cannot start Ryuk', () => {
  let nats: TestNats | undefined;
  afterAll(async () => {
    await nats?.stop();
  });

  it('runs the tests on a nats-server process and names the missing image', async () => {
    nats = await startTestNats({ ...process.env, NATS_URL: '', MATRIX_TEST_NATS: 'auto' });
    expect(nats.kind).toBe('process');
    expect(nats.reason).toMatch(/matrix-no-such-ryuk/);
    const nc = await connectBus({ servers: nats.url });
    await nc.flush();
    await nc.close();
  });
});
