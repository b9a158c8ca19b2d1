/**
 * What a target sends onto a request's reply subject, as a client with replies per request
 * receives it (the dispatcher's client of targets): only its own request's subject reaches it,
 * every message and its bytes are counted within the request's bound (and the target's), a
 * progress report nobody listens to is never decoded, and a request whose connection is lost
 * fails at once.
 */
import { encode } from '@msgpack/msgpack';
import { headers, type Msg, type NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient, ReplyMode } from '../../src/bus/client.js';
import type { Progress } from '../../src/bus/context.js';
import { ConnectionLostError, ReplyShapeError, TargetFloodError } from '../../src/bus/errors.js';
import { Header } from '../../src/bus/headers.js';
import { TARGETS_INBOX_PREFIX } from '../../src/bus/subjects.js';
import { testConnection, uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';

/** A report whose body takes milliseconds to decode: 5,000 keys. */
const heavyReport = encode({
  progress: 1,
  ...Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`k${i}`, i])),
});
const light = encode({ progress: 1 });
/** A report of 512 KiB: within the count, large in bytes. */
const bulky = encode({ progress: 1, pad: new Uint8Array(512 * 1024) });

describe('replies a target sends onto a request of its own', () => {
  let callerNc: NatsConnection;
  let targetNc: NatsConnection;
  let client: BusClient;
  /** The default bound of bytes, per request and per target. */
  let bytesClient: BusClient;
  /** One entry for each `$flood` that sent all it had. */
  const flooded: string[] = [];
  const mount = uniqueMount('replies');
  const progress = headers();
  progress.set(Header.Progress, '1');

  /** Mounts `op` on the target's connection: `answer` sends what it likes onto the request's reply subject. */
  function serve(op: string, answer: (msg: Msg) => void): void {
    targetNc.subscribe(`${mount}.${op}`, { callback: (_err, msg) => answer(msg) });
  }

  beforeAll(async () => {
    callerNc = await testConnection();
    targetNc = await testConnection();
    client = new BusClient(callerNc, {
      timeoutMs: 20_000,
      inboxPrefix: TARGETS_INBOX_PREFIX,
      replies: ReplyMode.PerRequest,
      // Bytes well past `$heavy`'s 100 reports of ~50 KB: what that test measures is decoding.
      reportBound: { burst: 200, perSecond: 10, bytes: 64 * 2 ** 20 },
    });
    bytesClient = new BusClient(callerNc, {
      timeoutMs: 20_000,
      inboxPrefix: TARGETS_INBOX_PREFIX,
      replies: ReplyMode.PerRequest,
    });
    // Junk onto every other subject of the inbox the request names, then the reply.
    serve('$junk', (msg) => {
      const inbox = msg.reply?.slice(0, msg.reply.lastIndexOf('.') + 1) ?? '';
      for (let i = 0; i < 1000; i++) targetNc.publish(`${inbox}guess${i}`, light, { headers: progress });
      msg.respond(encode({ ok: true }));
    });
    // Reports far past the bound, 250 at a time, then the reply.
    serve('$flood', (msg) => {
      void (async () => {
        for (let batch = 0; batch < 20; batch++) {
          for (let i = 0; i < 250; i++) msg.respond(light, { headers: progress });
          await targetNc.flush();
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        msg.respond(encode({ ok: true }));
        flooded.push(msg.subject);
      })();
    });
    // 40 reports of 512 KiB (20 MiB, far under the count of 200), then the reply.
    serve('$bulky', (msg) => {
      void (async () => {
        for (let i = 0; i < 40; i++) {
          msg.respond(bulky, { headers: progress });
          await targetNc.flush();
        }
        msg.respond(encode({ ok: true }));
      })();
    });
    // One reply of 900 KB after 4 reports of 512 KiB: what an honest large answer may look like.
    serve('$large', (msg) => {
      for (let i = 0; i < 4; i++) msg.respond(bulky, { headers: progress });
      msg.respond(encode({ pad: new Uint8Array(900_000) }));
    });
    // Replies built to be expensive to read (1 MB, a million levels or empty maps), and an error
    // reply whose body is: each is refused from its bytes.
    const deep = new Uint8Array(1_000_000).fill(0x91);
    deep[deep.length - 1] = 0xc0;
    const maps = new Uint8Array(1_000_005);
    maps[0] = 0xdd;
    new DataView(maps.buffer).setUint32(1, 1_000_000);
    maps.fill(0x80, 5);
    const jsonDeep = new TextEncoder().encode(`${'['.repeat(500_000)}${']'.repeat(500_000)}`);
    const json = headers();
    json.set(Header.ContentType, 'application/json');
    const failed = headers();
    failed.set('Nats-Service-Error-Code', '500');
    failed.set('Nats-Service-Error', 'failed');
    serve('$deep', (msg) => msg.respond(deep));
    serve('$maps', (msg) => msg.respond(maps));
    serve('$jsonDeep', (msg) => msg.respond(jsonDeep, { headers: json }));
    serve('$jsonDeepUnlabelled', (msg) => msg.respond(jsonDeep));
    serve('$deepError', (msg) => msg.respond(deep, { headers: failed }));
    // A result nested 93 levels (past a request's 64, within a reply's 128) is read.
    let nested: unknown = { content: [{ type: 'text', text: 'ok' }] };
    for (let i = 0; i < 90; i++) nested = { inner: nested };
    const nestedBody = encode(nested);
    serve('$nested', (msg) => msg.respond(nestedBody));
    // Never answers.
    serve('$silent', () => {});
    serve('$heavy', (msg) => {
      for (let i = 0; i < 100; i++) msg.respond(heavyReport, { headers: progress });
      msg.respond(encode({ ok: true }));
    });
    await targetNc.flush();
  });

  afterAll(() => {
    client.close();
    bytesClient.close();
  });

  it('receives nothing sent to other subjects of its inbox', async () => {
    await callerNc.flush();
    const before = callerNc.stats().inMsgs;
    expect(await client.request(mount, '$junk', {})).toEqual({ ok: true });
    await targetNc.flush();
    await callerNc.flush();
    expect(callerNc.stats().inMsgs - before).toBe(1);
  });

  it('fails a request whose target sends past its bound, naming the target, and stops receiving', async () => {
    const before = callerNc.stats().inMsgs;
    const ended = flooded.length;
    const failed = await client.request(mount, '$flood', {}, { onProgress: () => {} }).catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(TargetFloodError);
    expect((failed as TargetFloodError).code).toBe('unavailable');
    expect((failed as TargetFloodError).details?.target).toBe(mount);
    expect((failed as TargetFloodError).message).toMatch(
      new RegExp(`^${mount.replaceAll('.', '\\.')} sent 201 messages`),
    );
    await eventually(() => expect(flooded.length).toBe(ended + 1));
    await callerNc.flush();
    // Unsubscribed at the 201st: what was on its way still arrived, the rest was never delivered.
    expect(callerNc.stats().inMsgs - before).toBeLessThan(1000);
  });

  it('fails a request whose target sends past its bound of bytes, though within the count, and stops receiving', async () => {
    const before = callerNc.stats().inBytes;
    const failed = await bytesClient
      .request(mount, '$bulky', {}, { onProgress: () => {} })
      .catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(TargetFloodError);
    expect((failed as TargetFloodError).details?.target).toBe(mount);
    // The request's 4 MiB (twice the server's max_payload when that is more) hold 7 of 512 KiB with their framing.
    expect((failed as TargetFloodError).message).toMatch(/ sent \d+\.\d MiB in \d+ messages onto the reply subject/);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await callerNc.flush();
    // Unsubscribed once over: of the 20 MiB sent, what was on its way arrived, the rest was never delivered.
    const read = callerNc.stats().inBytes - before;
    console.log(`40 reports of 512 KiB: ${(read / 2 ** 20).toFixed(1)} MiB reached the caller`);
    expect(read).toBeLessThan(10 * 2 ** 20);
  });

  it('refuses a reply, or an error reply, built to be expensive to read, naming its subject, before decoding it', async () => {
    const cases: [string, string][] = [
      ['$deep', 'reply nests deeper than 128 levels'],
      ['$maps', 'reply holds an array of 1000000 items; at most 262144 are read'],
      ['$jsonDeep', 'reply nests deeper than 128 levels'],
      ['$jsonDeepUnlabelled', 'reply nests deeper than 128 levels'],
      ['$deepError', 'reply nests deeper than 128 levels'],
    ];
    for (const [op, why] of cases) {
      const failed = await bytesClient.request(mount, op, {}).catch((err: unknown) => err);
      expect(failed, op).toBeInstanceOf(ReplyShapeError);
      expect((failed as ReplyShapeError).code).toBe('internal');
      expect((failed as ReplyShapeError).message).toBe(
        `${mount}.${op} answered a reply refused unread for its shape: ${why}`,
      );
    }
    const nested = await bytesClient.request(mount, '$nested', {});
    expect(JSON.stringify(nested)).toMatch(/^(\{"inner":){90}\{"content":\[\{"type":"text","text":"ok"\}\]\}{91}$/);
  });

  it('takes a reply of 900 KB after a few large reports', async () => {
    const reply = (await bytesClient.request(mount, '$large', {})) as { pad: Uint8Array };
    expect(reply.pad.length).toBe(900_000);
  });

  it("bounds the bytes of all of a target's reports together, and stops all its requests past them", async () => {
    const big = uniqueMount('big');
    // 6 reports of 512 KiB a request (3 MiB, within the request's 4 MiB), then waits: 4 requests
    // are 12 MiB, over the target's 8 MiB.
    targetNc.subscribe(`${big}.$report`, {
      callback: (_err, msg) => {
        for (let i = 0; i < 6; i++) msg.respond(bulky, { headers: progress });
      },
    });
    await targetNc.flush();
    const bigClient = new BusClient(callerNc, {
      timeoutMs: 20_000,
      inboxPrefix: TARGETS_INBOX_PREFIX,
      replies: ReplyMode.PerRequest,
      targetReportBound: { burst: 5000, perSecond: 2000, bytes: 8 * 2 ** 20, bytesPerSecond: 1024 },
    });
    try {
      const outcomes = await Promise.all(
        Array.from({ length: 4 }, () => bigClient.request(big, '$report', {}).catch((err: unknown) => err)),
      );
      // Every request to it stopped, the ones still within their own bound too: none waits for its deadline.
      for (const o of outcomes) {
        expect(o).toBeInstanceOf(TargetFloodError);
        expect((o as TargetFloodError).message).toMatch(/all its requests take together/);
      }
      expect(bigClient.inFlight).toBe(0);
    } finally {
      bigClient.close();
    }
  });

  it('fails a request in flight at once when its connection is lost, saying it may have run', async () => {
    const nc = await testConnection();
    const lost = new BusClient(nc, {
      timeoutMs: 20_000,
      inboxPrefix: TARGETS_INBOX_PREFIX,
      replies: ReplyMode.PerRequest,
    });
    try {
      const waiting = lost.request(mount, '$silent', {}).catch((err: unknown) => err);
      await nc.flush();
      // The same as nats-server cutting a slow consumer, from this side: a disconnect, then a reconnect.
      await nc.reconnect();
      // A ConnectionLostError, not the TimeoutError its 20 s deadline (past the test's own timeout) would give.
      const failed = await waiting;
      expect(failed).toBeInstanceOf(ConnectionLostError);
      expect((failed as ConnectionLostError).code).toBe('unavailable');
      expect((failed as ConnectionLostError).message).toMatch(/may have run/);
      // Once the connection is back, requests go through (one sent while it reconnects may be lost).
      await eventually(async () =>
        expect(await lost.request(mount, '$junk', {}, { timeoutMs: 500 })).toEqual({ ok: true }),
      );
    } finally {
      lost.close();
      await nc.close();
    }
  });

  it("bounds the reports of all of a target's requests together, each within its own bound", async () => {
    const spread = uniqueMount('spread');
    const calm = uniqueMount('calm');
    // 150 reports a request, under the per-request burst of 200; 20 such requests at once.
    targetNc.subscribe(`${spread}.$report`, {
      callback: (_err, msg) => {
        for (let i = 0; i < 150; i++) msg.respond(light, { headers: progress });
        msg.respond(encode({ ok: true }));
      },
    });
    targetNc.subscribe(`${calm}.$report`, {
      callback: (_err, msg) => {
        for (let i = 0; i < 150; i++) msg.respond(light, { headers: progress });
        msg.respond(encode({ ok: true }));
      },
    });
    await targetNc.flush();
    const spreadClient = new BusClient(callerNc, {
      timeoutMs: 20_000,
      inboxPrefix: TARGETS_INBOX_PREFIX,
      replies: ReplyMode.PerRequest,
      reportBound: { burst: 200, perSecond: 10 },
      targetReportBound: { burst: 1000, perSecond: 10 },
    });
    try {
      const outcomes = await Promise.all(
        Array.from({ length: 20 }, () =>
          spreadClient.request(spread, '$report', {}).then(
            () => 'answered',
            (err: unknown) => err,
          ),
        ),
      );
      const stopped = outcomes.filter((o): o is TargetFloodError => o instanceof TargetFloodError);
      // 20 × 150 = 3,000 reports against 1,000 for the target: most requests are stopped, naming it.
      expect(stopped.length).toBeGreaterThanOrEqual(10);
      expect(stopped[0]?.details?.target).toBe(spread);
      expect(stopped[0]?.message).toMatch(/all its requests take together/);
      // Another target's bucket is its own.
      expect(await spreadClient.request(calm, '$report', {})).toEqual({ ok: true });
    } finally {
      spreadClient.close();
    }
  });

  it('decodes no report nobody listens to, and at most one an interval of those it holds back', async () => {
    /** Event-loop time of one `$heavy` request (100 reports of 5,000 keys each), and the reports its listener got. */
    const timed = async (listen: boolean, everyMs: number): Promise<{ cpuMs: number; told: Progress[] }> => {
      const told: Progress[] = [];
      const started = process.cpuUsage();
      const options = listen ? { onProgress: (p: Progress) => told.push(p), progressEveryMs: everyMs } : {};
      expect(await client.request(mount, '$heavy', {}, options)).toEqual({ ok: true });
      const used = process.cpuUsage(started);
      return { cpuMs: (used.user + used.system) / 1000, told };
    };
    await timed(false, 0);
    // The same run's control: every report decoded and told.
    const each = await timed(true, 0);
    expect(each.told).toHaveLength(100);
    const held = await timed(true, 60_000);
    // The first, then the latest held back, before the reply.
    expect(held.told).toEqual([{ progress: 1 }, { progress: 1 }]);
    const unheard = await timed(false, 0);
    console.log(
      `100 reports of ${heavyReport.length} bytes: ${each.cpuMs.toFixed(0)} ms decoded each, ${held.cpuMs.toFixed(0)} ms held back, ${unheard.cpuMs.toFixed(0)} ms unheard`,
    );
    expect(held.cpuMs).toBeLessThan(each.cpuMs / 3);
    expect(unheard.cpuMs).toBeLessThan(each.cpuMs / 3);
  });
});
