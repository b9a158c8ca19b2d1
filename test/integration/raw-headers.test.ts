/**
 * A header block nats.js cannot parse, sent raw (a lone LF inside `traceparent`, smuggling a
 * second header line), is the caller's bad request and is answered as such: `400 bad_request`,
 * not `500 internal` with a stack trace logged per request.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import type { Mount } from '../../src/bus/mount.js';
import { registryMount } from '../../src/registry/system-tools.js';
import type { ListReply } from '../../src/registry/types.js';
import { testConnection } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { rawNatsClient } from '../harness/raw-nats.js';

/** A bare NATS protocol client: CONNECT, one SUB, raw HPUB; collects what arrives. */
const rawClient = () => rawNatsClient('_INBOX.raw.*');

describe('a request whose header block cannot be parsed', () => {
  let mount: Mount;

  beforeAll(async () => {
    mount = await registryMount(await testConnection()).start();
  });
  afterAll(() => mount.stop());

  it('is a bad request, answered as one, and the mount goes on', async () => {
    const { socket, received } = await rawClient();
    try {
      const headers = 'NATS/1.0\r\ntraceparent: 00-aaaa\nMatrix-Principal: evil\r\n\r\n';
      const body = '{}';
      const hdrLen = Buffer.byteLength(headers, 'latin1');
      socket.write(`HPUB system.tools.$list _INBOX.raw.1 ${hdrLen} ${hdrLen + body.length}\r\n${headers}${body}\r\n`);
      const reply = await eventually(
        () => /HMSG _INBOX\.raw\.1 1 \d+ \d+\r\n([\s\S]*?)\r\n\r\n/.exec(received())?.[1] ?? false,
      );
      expect(reply).toMatch(/Nats-Service-Error-Code: 400/);
      expect(reply).toMatch(/Nats-Service-Error: the request's headers cannot be read/);
      socket.write(`PUB system.tools.$list _INBOX.raw.2 0\r\n\r\n`);
      await eventually(() => received().includes('MSG _INBOX.raw.2 1'));
    } finally {
      socket.destroy();
    }
  });
});

/**
 * nats.js parses a header block in time quadratic in its number of names: 60,000 distinct
 * names (~700 KB, within max_payload) held the mount ~22 s, every other caller waiting behind
 * it. The mount reads the block itself, and only a bounded one: more than 32 KiB is refused from
 * its length before a byte is read (reading 60,000 lines cost ~11 ms a request, enough for 40
 * such requests a second to hold every other caller), more than 64 lines once it gets there.
 */
describe('a request with a header block of 60,000 names', () => {
  let mount: Mount;

  beforeAll(async () => {
    mount = await registryMount(await testConnection()).start();
  });
  afterAll(() => mount.stop());

  /** What arrives for `headers` sent raw to `system.tools.$list` with reply subject `_INBOX.raw.<n>`. */
  async function answerTo(headers: string, n: number): Promise<string> {
    const { socket, received } = await rawClient();
    try {
      const hdrLen = Buffer.byteLength(headers, 'latin1');
      socket.write(`HPUB system.tools.$list _INBOX.raw.${n} ${hdrLen} ${hdrLen + 2}\r\n${headers}{}\r\n`);
      return await eventually(() => received().includes(`MSG _INBOX.raw.${n} 1 `) && received(), { timeoutMs: 3_000 });
    } finally {
      socket.destroy();
    }
  }
  const lines = (n: number) => Array.from({ length: n }, (_, i) => `f${i.toString(36)}: 1\r\n`).join('');

  it('is refused from its length, as a bad request', async () => {
    const reply = await answerTo(`NATS/1.0\r\n${lines(60_000)}\r\n`, 21);
    expect(reply).toMatch(/Nats-Service-Error-Code: 400/);
    expect(reply).toMatch(/the block is \d+ bytes, more than 32768/);
  });

  it('is refused past 64 lines, and served at 64', async () => {
    const json = 'Content-Type: application/json\r\n';
    expect(await answerTo(`NATS/1.0\r\n${lines(64)}${json}\r\n`, 22)).toMatch(/more than 64 lines/);
    const served = await answerTo(`NATS/1.0\r\n${lines(63)}${json}\r\n`, 23);
    expect(served).not.toMatch(/Nats-Service-Error/);
    expect(served).toContain('"contexts"');
  });

  it('holds nobody: a normal request sent alongside it is answered promptly', async () => {
    const { socket, received } = await rawClient();
    const client = new BusClient(await testConnection());
    try {
      const names = Array.from({ length: 60_000 }, (_, i) => `f${i.toString(36)}: 1\r\n`).join('');
      const headers = `NATS/1.0\r\n${names}traceparent: 00-0123456789abcdef0123456789abcdef-0123456789abcdef-01\r\n\r\n`;
      const body = '{}';
      const hdrLen = Buffer.byteLength(headers, 'latin1');
      socket.write(`HPUB system.tools.$list _INBOX.raw.9 ${hdrLen} ${hdrLen + body.length}\r\n${headers}${body}\r\n`);
      // Expected in tens of ms; the bound is generous for a loaded machine, and far under 22 s.
      const page = await client.request<ListReply>('system.tools', '$list', { limit: 1 }, { timeoutMs: 3_000 });
      expect(page.contexts.length).toBe(1);
      await eventually(() => received().includes('MSG _INBOX.raw.9 1'), { timeoutMs: 3_000 });
    } finally {
      client.close();
      socket.destroy();
    }
  });
});

describe('a reply with a header block of 60,000 names', () => {
  it('is read without holding the caller: the next request is answered promptly', async () => {
    const { socket, received } = await rawClient();
    const client = new BusClient(await testConnection());
    try {
      // A target that answers its first request with 60,000 header names, every later one plainly.
      socket.write('SUB flood.target.$op 2\r\nPING\r\n');
      await eventually(() => received().split('PONG').length > 2);
      const names = Array.from({ length: 60_000 }, (_, i) => `f${i.toString(36)}: 1\r\n`).join('');
      const flood = `NATS/1.0\r\n${names}Content-Type: application/json\r\n\r\n`;
      let answered = 0;
      const answer = async () => {
        const reply = await eventually(
          () => [...received().matchAll(/H?MSG flood\.target\.\$op 2 (\S+) /g)][answered]?.[1] ?? false,
        );
        const headers = answered++ === 0 ? flood : 'NATS/1.0\r\nContent-Type: application/json\r\n\r\n';
        const body = '{"ok":true}';
        const hdrLen = Buffer.byteLength(headers, 'latin1');
        socket.write(`HPUB ${reply} ${hdrLen} ${hdrLen + body.length}\r\n${headers}${body}\r\n`);
      };
      const first = client.request('flood.target', '$op', {}, { timeoutMs: 3_000 });
      await answer();
      // Answered within the request's 3 s: read in tens of ms, where nats.js's parse of the same
      // block takes 22 s or more (the request would end in TimeoutError).
      expect(await first).toEqual({ ok: true });
      const second = client.request('flood.target', '$op', {}, { timeoutMs: 3_000 });
      await answer();
      expect(await second).toEqual({ ok: true });
    } finally {
      client.close();
      socket.destroy();
    }
  });
});
