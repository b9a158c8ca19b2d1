/**
 * A header block nats.js cannot parse, sent raw (found by an outside attack: a lone LF inside
 * `traceparent`, smuggling a second header line): the mount answered `500 internal` and logged a
 * stack trace per request. It is the caller's bad request, answered as such.
 */
import { type Socket, connect as tcpConnect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Mount } from '../../src/bus/mount.js';
import { registryMount } from '../../src/registry/mount.js';
import { sharedNats, testConnection } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';

/** A bare NATS protocol client: CONNECT, one SUB, raw HPUB; collects what arrives. */
async function rawClient(): Promise<{ socket: Socket; received: () => string }> {
  const { servers, user, pass } = sharedNats();
  const url = new URL(String(servers).split(',')[0] as string);
  const socket = tcpConnect(Number(url.port), url.hostname);
  let text = '';
  socket.on('data', (chunk) => {
    text += chunk.toString('latin1');
  });
  await eventually(() => text.startsWith('INFO '));
  const auth = user === undefined ? {} : { user, pass };
  socket.write(`CONNECT ${JSON.stringify({ verbose: false, pedantic: false, headers: true, no_responders: true, protocol: 1, ...auth })}\r\n`);
  socket.write('SUB _INBOX.raw.* 1\r\nPING\r\n');
  await eventually(() => text.includes('PONG'));
  return { socket, received: () => text };
}

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
      const reply = await eventually(() => /HMSG _INBOX\.raw\.1 1 \d+ \d+\r\n([\s\S]*?)\r\n\r\n/.exec(received())?.[1] ?? false);
      expect(reply).toMatch(/Nats-Service-Error-Code: 400/);
      expect(reply).toMatch(/Nats-Service-Error: the request's headers cannot be read/);
      socket.write(`PUB system.tools.$list _INBOX.raw.2 0\r\n\r\n`);
      await eventually(() => received().includes('MSG _INBOX.raw.2 1'));
    } finally {
      socket.destroy();
    }
  });
});
