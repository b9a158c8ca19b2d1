/**
 * Attack: a principal that names a shared inbox, under NATS auth callout (docs/nats-auth-callout.md).
 * `inboxPrefixOf` (src/identity/callout/roles.ts) gives a principal the inbox `_INBOX_<principal>`,
 * and `roleUser` lets it subscribe to `<inbox>.>`. An approver or host is placed in MATRIX, where
 * `_INBOX_targets` is where mounts answer the service's calls (every tool result of every agent)
 * and `_INBOX_operator` where they answer operators (a host may not subscribe to its inbox; an
 * approver may). With the mapping's default principal (`sub`,
 * no prefix), a token whose subject is `targets` or `operator` (a client, or a person, so named at
 * the IdP) gets a user JWT that may subscribe to those shared inboxes: far past "its own inbox".
 * What must hold: no principal's role reads the inboxes of the service, the operators or a static
 * user; a mount's answer to the service reaches the service alone.
 */
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { roleUser } from '../../src/identity/callout/roles.js';
import { type CalloutBus, startCalloutBus } from '../harness/auth-callout.js';
import { eventually } from '../harness/eventually.js';
import { refusals } from '../harness/identity.js';

/** The shipped mapping's shape, its principal the token's `sub` as the default has it (no prefix). */
const mapping = {
  rules: [{ when: { groups: 'approvers' }, profile: 'default', role: 'approver', approve: { tools: ['*'] } }],
};

describe('auth callout: a principal named like a shared inbox', () => {
  let bus: CalloutBus;
  beforeAll(async () => {
    bus = await startCalloutBus({
      mapping,
      extraClients: [
        { id: 'targets', claims: { groups: ['approvers'] } },
        { id: 'operator', claims: { groups: ['approvers'] } },
      ],
    });
  }, 60_000);
  afterAll(async () => {
    await bus?.stop();
  });

  it.each([
    { client: 'targets', role: 'approver', shared: '_INBOX_targets' },
    { client: 'operator', role: 'approver', shared: '_INBOX_operator' },
  ] as const)(
    'gives $client ($role) no read of $shared, where mounts answer others',
    async ({ client, role, shared }) => {
      const token = await bus.idp.token(client);
      const nc = await connect({
        servers: bus.server.url,
        token,
        inboxPrefix: roleUser(role, client).inboxPrefix,
        reconnect: false,
      });
      const refused = refusals(nc);
      const heard: string[] = [];
      nc.subscribe(`${shared}.>`, { callback: (e, m) => void (e === null && heard.push(m.string())) });
      await nc.flush();
      // The example mount answers a call of the service (or an operator's) as it does: onto the shared inbox.
      const mount = await connect({ servers: bus.server.url, user: 'weather', pass: bus.passwords.weather });
      mount.publish(`${shared}.reply-1`, 'a tool result meant for the service alone');
      await mount.flush();
      await mount.close();
      await eventually(() => expect(refused.length + heard.length).toBeGreaterThan(0));
      expect(heard).toEqual([]);
      expect(refused).toContain(`subscription ${shared}.>`);
      await nc.close();
    },
  );
});
