/**
 * The harness against a real container engine (run by `npm run test:containers`, which needs
 * one: scripts/containers.sh makes one here): the NATS container is reached with its
 * credentials, and a half-there engine (no image to be had) does not fail the suite.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { connectBus } from '../../src/bus/connect.js';
import { startTestNats, type TestNats } from '../harness/nats-server.js';

const running: TestNats[] = [];
afterEach(async () => {
  for (const n of running.splice(0)) await n.stop();
});

async function start(env: NodeJS.ProcessEnv): Promise<TestNats> {
  const nats = await startTestNats({ ...env, NATS_URL: '' });
  running.push(nats);
  return nats;
}

describe('the test harness with a container engine', () => {
  it('connects to the NATS container with the user and password the module starts it with', async () => {
    const nats = await start({ MATRIX_TEST_NATS: 'container', NATS_IMAGE: process.env.NATS_IMAGE });
    expect(nats.kind).toBe('container');
    const nc = await connectBus({ servers: nats.url, user: nats.user, pass: nats.pass });
    try {
      await nc.flush();
      expect(nc.info?.jetstream).toBe(true);
    } finally {
      await nc.close();
    }
    // The server does demand them: without, it refuses.
    await expect(connectBus({ servers: nats.url })).rejects.toThrow(/Authorization Violation/i);
  });

  it('falls back to a nats-server process, and says why, when the image cannot be had', async () => {
    const nats = await start({ NATS_IMAGE: 'localhost/matrix-no-such-nats:0' });
    expect(nats.kind).toBe('process');
    expect(nats.reason).toMatch(/a container engine answers, but localhost\/matrix-no-such-nats:0 did not start/);
    const nc = await connectBus({ servers: nats.url });
    await nc.flush();
    await nc.close();
  });

  it('fails when a container is demanded and cannot be had', async () => {
    await expect(
      start({ MATRIX_TEST_NATS: 'container', NATS_IMAGE: 'localhost/matrix-no-such-nats:0' }),
    ).rejects.toThrow(/did not start/);
  });
});
