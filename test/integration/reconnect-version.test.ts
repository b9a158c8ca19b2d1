/**
 * Holder binding follows the nats-server a reconnect reaches (PROTOCOL 16): in a deployment of
 * mixed versions the service may reconnect from a fixed server to one without the fixes for
 * CVE-2026-33223 and CVE-2026-33246, and from then on refuses grants bound by `nats.user`
 * (`unsafe_server`), as `$introspect` says; back on a fixed server it serves them again. The
 * servers take turns on one port, as a cluster member replaced by another would.
 */

import { headers, type NatsConnection } from '@nats-io/nats-core';
import { createAccount } from '@nats-io/nkeys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeReply } from '../../src/bus/codec.js';
import { connectBus } from '../../src/bus/connect.js';
import { Header } from '../../src/bus/headers.js';
import type { Mount } from '../../src/bus/mount.js';
import { IdentityGate } from '../../src/identity/gate.js';
import { mintGrant } from '../../src/identity/mint.js';
import { registryMount } from '../../src/registry/system-tools.js';
import type { IntrospectReply } from '../../src/registry/types.js';
import { eventually } from '../harness/eventually.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { NatsVersion, natsTool } from '../harness/nats-tools.js';

const issuer = createAccount();
const bound = mintGrant(issuer, {
  principal: 'agent:a',
  session: 's-1',
  resolve: { profile: 'default' },
  ttlSeconds: 3600,
  user: 'agent',
});

describe('holder binding after a reconnect to a server of another version', () => {
  let server: ProcessNats;
  let nc: NatsConnection;
  let mount: Mount;

  /**
   * `$resolve` under the bound grant, its sender named in `Nats-Request-Info` (on one account
   * nothing is attested: the value sent stands in for the server's). The reply's `error.details.grant`, or 'ok'.
   */
  const resolve = async (): Promise<string> => {
    const h = headers();
    h.set(Header.ContentType, 'application/json');
    h.set(Header.Grant, bound);
    h.set(Header.RequestInfo, JSON.stringify({ acc: '$G', user: 'agent' }));
    const msg = await nc.request('system.tools.$resolve', JSON.stringify({ profile: 'default' }), {
      timeout: 5_000,
      headers: h,
    });
    const body = decodeReply(msg.data, msg.headers?.get(Header.ContentType)) as {
      error?: { details?: { grant?: string } };
    };
    return body.error === undefined ? 'ok' : String(body.error.details?.grant);
  };
  const natsServer = async () => {
    const h = headers();
    h.set(Header.ContentType, 'application/json');
    const msg = await nc.request('system.tools.$introspect', '{}', { timeout: 5_000, headers: h });
    return (decodeReply(msg.data, 'application/json') as IntrospectReply).natsServer;
  };
  /** Kills the running server and starts `version` on its port; resolves once the connection is back. */
  const replaceWith = async (version: string) => {
    const port = server.port;
    await server.stop();
    server = await startNatsProcess([], { bin: natsTool('server', version), atPort: port });
    await eventually(async () => expect((await natsServer())?.version).toBe(version), { timeoutMs: 15_000 });
  };

  beforeAll(async () => {
    server = await startNatsProcess([], { bin: natsTool('server', NatsVersion.newest) });
    nc = await connectBus({ servers: server.url, name: 'reconnect-version' });
    mount = await registryMount(nc, { identity: IdentityGate.forIssuers([issuer.getPublicKey()]) }).start();
  });
  afterAll(async () => {
    await mount?.stop();
    if (nc !== undefined && !nc.isClosed()) await nc.close();
    await server?.stop();
  });

  it('serves a bound grant on a fixed server, refuses it after a reconnect to an affected one, and serves it again after one back', async () => {
    expect(await resolve()).toBe('ok');
    expect(await natsServer()).toMatchObject({ version: NatsVersion.newest, holderBinding: 'trusted' });

    await replaceWith(NatsVersion.affected);
    expect(await resolve()).toBe('unsafe_server');
    expect(await natsServer()).toMatchObject({ version: NatsVersion.affected, holderBinding: 'refused' });

    await replaceWith(NatsVersion.oldest);
    expect(await resolve()).toBe('ok');
  }, 60_000);
});
