/**
 * Lanes: the integration and system tiers run `TEST_LANES` files at once, each lane on a shared
 * NATS server of its own, so two files never share a server (each mounts system.tools on it).
 * Read by vitest.config.ts (how many workers) and the global setup (how many servers).
 */

/** `TEST_LANES` when set; else 1 on a server the run does not start itself (`NATS_URL`) or on a
 * demanded NATS container (CI's path, one container), else 2. */
export function testLanes(env: NodeJS.ProcessEnv = process.env): number {
  if (env.TEST_LANES) {
    const lanes = Number(env.TEST_LANES);
    if (!Number.isInteger(lanes) || lanes < 1)
      throw new Error(`TEST_LANES must be a whole number ≥ 1, not ${JSON.stringify(env.TEST_LANES)}`);
    if (lanes > 1 && env.NATS_URL) throw new Error('TEST_LANES > 1 needs a server per lane: unset NATS_URL');
    return lanes;
  }
  return env.NATS_URL || env.MATRIX_TEST_NATS === 'container' ? 1 : 2;
}

/** The lane of this test worker: vitest numbers its concurrent workers 1…maxWorkers (`VITEST_POOL_ID`). */
export function laneOfWorker(lanes: number, poolId: string | undefined): number {
  const id = Number(poolId ?? 1);
  return Number.isInteger(id) && id >= 1 ? (id - 1) % lanes : 0;
}
