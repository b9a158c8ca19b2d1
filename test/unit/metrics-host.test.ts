/**
 * `/metrics` on a loopback address answers only a `Host` that names it: a page on another site
 * that points its own name at 127.0.0.1 (DNS rebinding) sends its own name, and with no token
 * would otherwise read every metric.
 */
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTelemetry, type Telemetry } from '../../src/telemetry/sdk.js';

/** The status of `GET /metrics` on `port` with this `Host` header. */
function statusFor(port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/metrics', headers: { host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.once('error', reject);
    req.end();
  });
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('the metrics endpoint on a loopback address', () => {
  let telemetry: Telemetry | undefined;
  let port: number;
  beforeAll(async () => {
    port = await freePort();
    telemetry = await startTelemetry({ metricsPort: port });
  });
  afterAll(() => telemetry?.shutdown());

  it('answers a Host naming it: 127.0.0.1, localhost or [::1] with its port', async () => {
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`])
      expect(await statusFor(port, host), host).toBe(200);
  });

  it('refuses with 421 a Host naming another site or another port', async () => {
    for (const host of ['evil.example', `evil.example:${port}`, `127.0.0.1:${port + 1}`, 'localhost'])
      expect(await statusFor(port, host), host).toBe(421);
  });
});
