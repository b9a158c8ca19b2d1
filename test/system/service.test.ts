import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import type { IntrospectReply, ResolvedToolContext } from '../../src/registry/types.js';
import { sharedNatsUrl, testConnection } from '../harness/bus.js';
import { type ServiceProcess, startService } from '../harness/service.js';

describe('the service as npm start runs it', () => {
  let client: BusClient;
  const services: ServiceProcess[] = [];

  beforeAll(async () => {
    client = new BusClient(await testConnection(), { timeoutMs: 5_000 });
    services.push(...(await Promise.all([startService(sharedNatsUrl()), startService(sharedNatsUrl())])));
  });
  afterAll(async () => {
    client.close();
    await Promise.all(services.map((s) => s.stop('SIGKILL')));
  });

  it('shares the load of two processes in one queue group, and loses nothing when one stops', async () => {
    const instances = async (n: number) => {
      const replies = await Promise.all(
        Array.from({ length: n }, () => client.request<IntrospectReply>('system.tools', '$introspect', {})),
      );
      return new Set(replies.map((r) => r.instance.id));
    };
    expect((await instances(200)).size).toBe(2);

    const [first] = services;
    let failures = 0;
    let answered = 0;
    let stopping: Promise<number | null> | undefined;
    for (let round = 0; round < 40; round++) {
      if (round === 10) stopping = first?.stop('SIGTERM');
      const results = await Promise.allSettled(
        Array.from({ length: 25 }, () =>
          client.request<ResolvedToolContext>('system.tools', '$resolve', { profile: 'default' }),
        ),
      );
      for (const r of results) {
        if (r.status === 'fulfilled' && r.value.contexts[0] === 'actor-readonly') answered++;
        else failures++;
      }
    }
    expect(await stopping).toBe(0);
    expect(first?.output()).toContain('SIGTERM: draining');
    expect(failures).toBe(0);
    expect(answered).toBe(1_000);
    expect((await instances(50)).size).toBe(1);
  });

  it('says in one line where NATS is missing and how to get it', async () => {
    await expect(startService('nats://127.0.0.1:1')).rejects.toThrow(
      /cannot reach NATS at nats:\/\/127\.0\.0\.1:1 .*docker compose up -d nats.*nats-server/,
    );
  });
});
