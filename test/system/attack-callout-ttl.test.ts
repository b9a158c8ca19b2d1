/**
 * Attack: a token the service refuses as too long-lived still opens the bus (docs/nats-auth-callout.md).
 * The service refuses an access token living longer than `MATRIX_GRANT_MAX_TTL` (a day by
 * default; `GrantVerifier.verifyAsync`, src/identity/verify.ts), but the callout
 * (`AuthCallout.authorize`, src/identity/callout/service.ts) checks only what `OidcTrust` checks
 * and gives a user JWT expiring with the token: a 30-day token (a misconfigured client, or a
 * long-lived one leaked) holds a NATS connection for 30 days, which a later `$revoke` does not
 * end (revocation is checked at connect). What must hold: a token the service would not take as a
 * grant does not connect either.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { type CalloutBus, startCalloutBus } from '../harness/auth-callout.js';

describe('auth callout: a token living longer than MATRIX_GRANT_MAX_TTL', () => {
  let bus: CalloutBus;
  beforeAll(async () => {
    bus = await startCalloutBus({
      extraClients: [{ id: 'long-lived', claims: { groups: ['agents'] }, ttlSeconds: 30 * 86_400 }],
    });
  }, 60_000);
  afterAll(async () => {
    await bus?.stop();
  });

  it('is refused at connect, as the service refuses it as a grant', async () => {
    const token = await bus.idp.token('long-lived');
    // The service's own verdict on it: too long-lived.
    const agent = await bus.connect(await bus.token('agent'));
    const client = new BusClient(agent, { timeoutMs: 10_000 });
    await expect(
      client.request(
        'system.dispatcher',
        '$call',
        { session: { profile: 'default' }, call: { id: 'c-long', name: 'matrix_introspect', arguments: {} } },
        { grant: token },
      ),
    ).rejects.toThrow(/longer than the 86400 s/);
    client.close();
    // The callout's: it should be the same.
    await expect(bus.connect(token)).rejects.toThrow(/Authorization Violation|authorization/i);
  });
});
