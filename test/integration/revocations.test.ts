/**
 * The revocations bucket on a real nats-server: a watch started after revocations were stored
 * knows them once `caughtUp` resolves (an instance serves only then, so a grant revoked while it
 * was down is refused from its first call), and a revocation deleted from the bucket is dropped.
 */
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RevocationStore, Revocations } from '../../src/identity/revocations.js';
import { testConnection } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { uniqueBucket } from '../harness/registry.js';

describe('the revocations bucket', () => {
  let nc: NatsConnection;
  const bucket = uniqueBucket();

  beforeAll(async () => {
    nc = await testConnection();
  });
  afterAll(async () => {
    await (await new Kvm(nc).open(bucket)).destroy();
  });

  it('is known to a watch started later once it has caught up', async () => {
    const store = await RevocationStore.open(nc, { bucket, maxAgeMs: 3_600_000 });
    for (let i = 0; i < 50; i++) await store.revoke({ jti: `grant-${i}`, reason: 'leaked' });
    const { key } = await store.revoke({ sub: 'agent:late' });
    const revocations = new Revocations();
    const watch = store.watch(revocations);
    try {
      await watch.caughtUp;
      expect(revocations.size).toBe(51);
      expect(revocations.find({ jti: 'grant-49', sub: 'x', iat: 0 })).toMatchObject({ reason: 'leaked' });
      expect(
        revocations.find({ jti: 'other', sub: 'agent:late', iat: Math.floor(Date.now() / 1000) - 5 }),
      ).toBeDefined();
      await (await new Kvm(nc).open(bucket)).delete(key);
      await eventually(() => expect(revocations.size).toBe(50));
    } finally {
      watch.stop();
    }
  });
});
