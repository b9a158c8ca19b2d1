/**
 * A `$list` page holds `limit` contexts, or fewer where more would not fit in one reply: 500
 * contexts of the largest a spec may have make 16.7 MB, which would be built and encoded on the
 * event loop every caller shares only to be refused as too large. A page stops where the
 * server's max_payload does, and its `nextCursor` leads through every context once.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import type { Mount } from '../../src/bus/mount.js';
import { Registry } from '../../src/registry/registry.js';
import { StaticStore } from '../../src/registry/store.js';
import { registryMount } from '../../src/registry/system-tools.js';
import type { ListReply, ToolContextSpec } from '../../src/registry/types.js';
import { testConnection } from '../harness/bus.js';

const CONTEXTS = 600;

/** A context as large as `$list` shows any: the longest title and description, 256 tools, 64 capabilities each way. */
function largest(i: number): ToolContextSpec {
  return {
    key: `large.${String(i).padStart(4, '0')}`,
    title: 't'.repeat(200),
    description: 'd'.repeat(8192),
    matrixTools: Array.from({ length: 256 }, (_, j) => ({
      name: `tool_${j}_`.padEnd(64, 'x'),
      description: 'a tool',
      inputSchema: { type: 'object' },
      target: 'app.large',
      op: '$run',
    })),
    provides: Array.from({ length: 64 }, (_, j) => `cap.${j}`.padEnd(60, 'c')),
    requires: Array.from({ length: 64 }, (_, j) => `req.${j}`.padEnd(60, 'r')),
    permissions: { approval: 'never' },
  };
}

describe('$list of the largest contexts, 500 a page', () => {
  let nc: NatsConnection;
  let client: BusClient;
  let mount: Mount;

  beforeAll(async () => {
    nc = await testConnection();
    client = new BusClient(nc, { timeoutMs: 30_000 });
    const store = new StaticStore(
      Array.from({ length: CONTEXTS }, (_, i) => ({
        spec: largest(i),
        source: 'registered' as const,
        revision: i + 1,
      })),
      CONTEXTS,
    );
    mount = await registryMount(nc, { registry: new Registry(store) }).start();
  });
  afterAll(async () => {
    await mount.stop();
    client.close();
    await nc.close();
  });

  it('answers pages that fit in one reply, which lead through every context once', async () => {
    const delay = monitorEventLoopDelay({ resolution: 5 });
    delay.enable();
    await new Promise((r) => setTimeout(r, 20));
    const seen: string[] = [];
    const sizes: number[] = [];
    const times: number[] = [];
    let cursor: string | undefined;
    do {
      const t = performance.now();
      const page: ListReply = await client.request('system.tools', '$list', { limit: 500, cursor });
      times.push(performance.now() - t);
      sizes.push(page.contexts.length);
      seen.push(...page.contexts.map((c) => c.key));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    delay.disable();
    console.info(
      `${sizes.length} pages of ${sizes.join(', ')} contexts, ${times.map((ms) => ms.toFixed(0)).join(', ')} ms each; loop delay max ${(delay.max / 1e6).toFixed(1)} ms`,
    );
    expect(seen).toEqual(Array.from({ length: CONTEXTS }, (_, i) => largest(i).key));
    // ~25 KB a context: about 40 fit in 1 MB.
    expect(Math.max(...sizes)).toBeLessThan(500);
    expect(sizes.length).toBeGreaterThan(1);
    // What bounds the stall is the page's size, held above; its time is printed, not bounded (a
    // page takes tens of ms alone and some hundreds with both cores busy).
  }, 60_000);
});
