/**
 * Discovery answers are any mount user's to write, and the service survives every one: an answer
 * with a header block nats.js cannot decode leaves the service connection's reader running (else
 * every call would time out for minutes), a forged empty "no responders" status does not end
 * discovery before the real answers come, and an answer whose `endpoints` is not a list is
 * dropped instead of failing every `matrix_introspect`.
 */
import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { discoverService, serveDiscovery } from '../../src/bus/discovery.js';
import { describeMounts } from '../../src/reference-mounts/agents.js';
import { testConnection } from '../harness/bus.js';
import { rawNatsClient } from '../harness/raw-nats.js';

/** A bare NATS protocol client subscribed to `subject`, answering each request with `answer(reply)` (raw protocol text). */
async function rawResponder(subject: string, answer: (reply: string) => string): Promise<Socket> {
  let text = '';
  const { socket } = await rawNatsClient(subject, (chunk) => {
    text += chunk;
    for (let m = /MSG \S+ 1 (\S+) \d+\r\n\r\n/.exec(text); m !== null; m = /MSG \S+ 1 (\S+) \d+\r\n\r\n/.exec(text)) {
      text = text.slice(m.index + m[0].length);
      socket.write(answer(m[1] as string));
    }
  });
  return socket;
}

/** An HPUB of headers and no body. */
function emptyWithHeaders(reply: string, headerBlock: string): string {
  const n = Buffer.byteLength(headerBlock, 'latin1');
  return `HPUB ${reply} ${n} ${n}\r\n${headerBlock}\r\n`;
}

describe('discovery answers a mount user forges', () => {
  const service = `forged-${randomBytes(4).toString('hex')}`;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    // The real instance answers $SRV.PING.<service> as every mount does.
    const nc = await testConnection();
    serveDiscovery(nc, {
      mount: service,
      id: 'real',
      version: '1.0.0',
      description: 'real',
      startedAt: new Date(),
      endpoints: () => [],
    });
    await nc.flush();
  });
  afterAll(() => {
    for (const s of sockets) s.destroy();
  });

  it('skip a header block nats.js cannot decode, and the connection goes on reading', async () => {
    sockets.push(
      await rawResponder(`$SRV.PING.${service}`, (reply) => emptyWithHeaders(reply, 'NATS/1.0\r\nBad Name: x\r\n\r\n')),
    );
    const nc = await testConnection();
    const found = await discoverService<{ name: string; id: string }>(nc, 'PING', service, 300);
    expect(found.map((f) => f.id)).toEqual(['real']);
    // The reader still runs: a round trip to the server completes.
    await expect(
      Promise.race([nc.flush().then(() => 'read'), new Promise((r) => setTimeout(() => r('wedged'), 3_000))]),
    ).resolves.toBe('read');
  });

  it('wait for the real answers past a forged "no responders"', async () => {
    sockets.push(
      await rawResponder(`$SRV.PING.${service}`, (reply) => emptyWithHeaders(reply, 'NATS/1.0 503\r\n\r\n')),
    );
    const nc = await testConnection();
    // The forger answers at once; the real instance a moment later (its connection is another).
    for (let i = 0; i < 5; i++) {
      const found = await discoverService<{ name: string; id: string }>(nc, 'PING', service, 300);
      expect(found.map((f) => f.id)).toContain('real');
    }
  });

  it('describe only well-formed INFO answers, each bounded', () => {
    const described = describeMounts([
      {
        name: 'app-ok',
        id: '1',
        version: '1',
        metadata: { mount: 'app.ok' },
        endpoints: [{ name: 'x', subject: 'app.ok.$x' }],
      },
      { name: 'app-bad', id: '2', version: '1', endpoints: 'not a list' },
      {
        name: 'app-long',
        id: '3',
        version: '1',
        description: 'd'.repeat(100_000),
        endpoints: Array.from({ length: 1_000 }, (_, i) => ({ name: `e${i}`, subject: `app.long.$e${i}` })),
      },
      { id: 'no name' },
      null,
    ]);
    expect(described.map((d) => d.mount)).toEqual(['app-bad', 'app.long', 'app.ok']);
    const long = described.find((d) => d.mount === 'app.long');
    expect(long?.description?.length).toBe(512);
    expect(long?.ops).toHaveLength(64);
  });
});
