import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { afterAll, describe, expect, it } from 'vitest';
import { Bucket } from '../../src/bus/kv.js';
import { KvContextStore } from '../../src/registry/kv-store.js';
import { testConnection } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { contextSpec } from '../harness/registry.js';

describe('the registry’s KV watch', () => {
  const bucket = `watch-stall-${process.pid}`;
  let store: KvContextStore | undefined;
  afterAll(async () => {
    store?.close();
    const nc = await testConnection();
    await (await new Kvm(nc).open(bucket)).destroy();
  });

  it('starts again when its consumer disappears without the watch ending', async () => {
    const nc = await testConnection();
    const opened = await KvContextStore.open(nc, { bucket });
    store = opened;
    await opened.register(contextSpec('before'));
    // What a cluster node dying with the watch's consumer looks like from here: the consumer is
    // gone, and the nats.js iterator neither ends nor errs.
    const jsm = await jetstreamManager(nc);
    for await (const c of jsm.consumers.list(`KV_${bucket}`)) await jsm.consumers.delete(`KV_${bucket}`, c.name);
    const writer = await new Kvm(await testConnection()).open(bucket);
    await writer.put('after', JSON.stringify(contextSpec('after')));
    await eventually(() => expect(opened.get('after')).toBeDefined());
    expect(opened.keys()).toEqual(expect.arrayContaining(['before', 'after']));
  }, 20_000);

  it('does not take an empty bucket for a stalled watch', async () => {
    const nc = await testConnection();
    const name = `watch-empty-${process.pid}`;
    const empty = await Bucket.open(nc, name);
    const errors: unknown[] = [];
    const watch = empty.watch(
      () => {},
      (err) => errors.push(err),
      { checkMs: 50, stallMs: 150 },
    );
    await new Promise((r) => setTimeout(r, 1_000));
    watch.stop();
    await (await new Kvm(nc).open(name)).destroy();
    expect(errors).toEqual([]);
  });

  it('keeps its sorted keys and provider index right through a stream of writes and deletes', async () => {
    const nc = await testConnection();
    const name = `watch-index-${process.pid}`;
    const seeded = await Bucket.open(nc, name);
    const model = new Map<string, string[]>();
    const put = async (bucket: Bucket, i: number, step: number) => {
      const key = `k-${(i * 7919) % 500}`;
      const provides = step % 4 === 0 ? [] : [`cap-${step % 3}`, ...(step % 5 === 0 ? ['rare'] : [])];
      const revision = await bucket.put(key, new TextEncoder().encode(JSON.stringify(contextSpec(key, { provides }))));
      model.set(key, provides);
      return revision;
    };
    // Loaded at start (out of key order), then followed change by change.
    for (let i = 0; i < 200; i++) await put(seeded, i, i);
    const indexed = await KvContextStore.open(nc, { bucket: name });
    let revision = 0;
    for (let step = 0; step < 400; step++) {
      const i = (step * 31 + 11) % 260;
      if (step % 3 === 0) {
        const key = `k-${(i * 7919) % 500}`;
        if (model.delete(key)) revision = await indexed.bucket.delete(key);
      } else {
        revision = await put(indexed.bucket, i, step);
      }
    }
    await indexed.waitForRevision(revision);
    const builtins = ['actor-edit', 'actor-readonly', 'repo-coding', 'test-runner'];
    expect(indexed.keys()).toEqual([...builtins, ...model.keys()].sort());
    for (const capability of ['cap-0', 'cap-1', 'cap-2', 'rare']) {
      expect(indexed.providersOf(capability)).toEqual(
        [...model]
          .filter(([, provides]) => provides.includes(capability))
          .map(([key]) => key)
          .sort(),
      );
    }
    expect(indexed.providersOf('actor.read')).toEqual(['actor-readonly']);
    indexed.close();
    await (await new Kvm(nc).open(name)).destroy();
  }, 30_000);
});
