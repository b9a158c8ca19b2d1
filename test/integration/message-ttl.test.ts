/**
 * Records that expire, on a server with per-message TTL (2.15.3: the server removes each at its
 * own time, no sweeper runs) and on one without (Debian's 2.9.10: the sweeper removes them, as
 * before). What the server can do is read from its JetStream API level, not its version.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalBook } from '../../src/approvals/book.js';
import { ApprovalStore } from '../../src/approvals/store.js';
import type { StoredApproval } from '../../src/approvals/types.js';
import { connectBus } from '../../src/bus/connect.js';
import { Bucket } from '../../src/bus/kv.js';
import { silentLogger } from '../../src/bus/log.js';
import { jetStreamFeatures } from '../../src/bus/server-features.js';
import { RevocationStore, Revocations } from '../../src/identity/revocations.js';
import { TASK_MARKER_TTL_MS, TaskStore } from '../../src/tasks/store.js';
import type { TaskRecord } from '../../src/tasks/types.js';
import { eventually } from '../harness/eventually.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { NatsVersion, natsTool } from '../harness/nats-tools.js';
import { uniqueBucket } from '../harness/registry.js';

/** A record's life in these tests, in ms: the shortest per-message TTL is a second. */
const LIFE_MS = 1_500;

const servers = [
  { server: `nats-server ${NatsVersion.newest}`, bin: () => natsTool('server', NatsVersion.newest), ttl: true },
  { server: 'nats-server 2.9.10 (Debian)', bin: () => '/usr/sbin/nats-server', ttl: false },
];

describe.each(servers)('expiring records on $server', ({ bin, ttl }) => {
  let nats: ProcessNats;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsProcess([], { bin: bin() });
    nc = await connectBus({ servers: nats.url, name: 'message-ttl' });
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it(`reads per-message TTL from the API level (${ttl ? 'has it' : 'has not'})`, async () => {
    const features = await jetStreamFeatures(nc);
    expect(features.messageTtl).toBe(ttl);
    expect(features.apiLevel >= 1).toBe(ttl);
    expect(await jetStreamFeatures(nc)).toBe(features);
  });

  it(`removes an expired approval ${ttl ? 'by its TTL, no sweeper running' : 'by the sweeper'}, told once`, async () => {
    const store = await ApprovalStore.open(nc, { bucket: uniqueBucket() });
    expect(store.expires).toBe(ttl);
    const told: StoredApproval[] = [];
    // Two instances: of the two, one tells the expiry.
    const books = [0, 1].map(() => new ApprovalBook(store, (r) => told.push(r), silentLogger));
    for (const book of books) await book.start(200);
    try {
      for (const book of books) expect(book.sweeping).toBe(!ttl);
      const request = { callId: 'c-1', tool: 't', target: 'x', op: 'run', arguments: {}, principal: 'agent:a' };
      const { record } = await store.ask(request, Date.now() + LIFE_MS);
      expect(await store.get(record.approvalId)).toBeDefined();
      await eventually(async () => expect(await store.get(record.approvalId)).toBeUndefined());
      await eventually(() => expect(told.map((r) => r.approvalId)).toEqual([record.approvalId]));
      await eventually(() => {
        for (const book of books) expect(book.live('agent:a', undefined).total).toBe(0);
      });
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(told).toHaveLength(1);
    } finally {
      for (const book of books) book.stop();
      await (await new Kvm(nc).open(store.bucket.name)).destroy();
    }
  });

  it(`${ttl ? 'removes' : 'keeps (for the sweeper)'} a revocation past its until`, async () => {
    const bucket = uniqueBucket();
    const store = await RevocationStore.open(nc, { bucket, maxAgeMs: 3_600_000 });
    expect(store.expires).toBe(ttl);
    const into = new Revocations();
    const watch = store.watch(into);
    try {
      await watch.caughtUp;
      const { key, until } = await store.revoke({ jti: 'leaked' });
      await store.revoke({ jti: 'short', until: new Date(Date.now() + LIFE_MS).toISOString() });
      await eventually(() => expect(into.size).toBe(2));
      const kv = await Bucket.bind(nc, bucket);
      await new Promise((resolve) => setTimeout(resolve, LIFE_MS + 1_500));
      if (ttl) await eventually(() => expect(into.size).toBe(1));
      else expect(into.size).toBe(2);
      expect(await kv.keys()).toHaveLength(ttl ? 1 : 2);
      expect(Date.parse(until)).toBeGreaterThan(Date.now());
      expect(await kv.get(key)).not.toBeNull();
    } finally {
      watch.stop();
      await (await new Kvm(nc).open(bucket)).destroy();
    }
  });

  it(`${ttl ? 'removes' : 'keeps (for the runner)'} a task past its expiresAt`, async () => {
    const store = await TaskStore.open(nc, { bucket: uniqueBucket() });
    try {
      const call = { id: 'c-1', name: 'work', arguments: {} };
      await store.create('owner.short', { call, expiresAt: Date.now() + LIFE_MS } as TaskRecord);
      await store.create('owner.long', { call, expiresAt: Date.now() + 3_600_000 } as TaskRecord);
      await new Promise((resolve) => setTimeout(resolve, LIFE_MS + 1_500));
      if (ttl) await eventually(async () => expect(await store.get('owner.short')).toBeUndefined());
      else expect(await store.get('owner.short')).toBeDefined();
      expect(await store.get('owner.long')).toBeDefined();
      // Each task's key is used once: its marker is kept a minute, not the hour of other buckets,
      // so tasks made in a loop cannot fill the bucket with markers.
      if (ttl) {
        const info = await (await jetstreamManager(nc)).streams.info(`KV_${store.bucket.name}`);
        expect(info.config.subject_delete_marker_ttl).toBe(TASK_MARKER_TTL_MS * 1_000_000);
      }
    } finally {
      await (await new Kvm(nc).open(store.bucket.name)).destroy();
    }
  });

  it(`${ttl ? 'turns per-message TTL on for' : 'leaves as it is'} a bucket made without it`, async () => {
    const name = uniqueBucket();
    await Bucket.open(nc, name, { history: 1 });
    const store = await ApprovalStore.open(nc, { bucket: name });
    expect(store.expires).toBe(ttl);
    const config = (await (await jetstreamManager(nc)).streams.info(`KV_${name}`)).config;
    expect(config.allow_msg_ttl === true).toBe(ttl);
    expect((await ApprovalStore.bind(nc, name)).expires).toBe(ttl);
    await (await new Kvm(nc).open(name)).destroy();
  });
});
