/**
 * The claims mapping's `role` (contracts/oidc-mapping.json) and the NATS user each role becomes
 * under auth callout: the permissions are deploy/nats.conf's for that kind of user, read from
 * the file itself, so the two cannot drift apart.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BadRequestError } from '../../src/bus/errors.js';
import { AGENT_OPS, inboxPrefixOf, roleUser } from '../../src/identity/callout/roles.js';
import { loadClaimsMapping, mapClaims } from '../../src/identity/oidc/mapping.js';
import { deployConf } from '../harness/nats-conf.js';

const write = (mapping: unknown) => {
  const file = join(mkdtempSync(join(tmpdir(), 'mapping-')), 'mapping.json');
  writeFileSync(file, JSON.stringify(mapping));
  return file;
};

describe('the role of a mapping rule', () => {
  it('is the rule’s role, agent where it names none, and a role outside the four is refused', () => {
    const mapping = loadClaimsMapping(
      write({
        rules: [{ when: { groups: 'ops' }, profile: 'default', role: 'operator' }, { profile: 'default' }],
      }),
    );
    expect(mapClaims({ sub: 'alice', groups: ['ops'] }, mapping)).toMatchObject({
      principal: 'alice',
      role: 'operator',
    });
    expect(mapClaims({ sub: 'bob' }, mapping)).toMatchObject({ principal: 'bob', role: 'agent' });
    expect(() => loadClaimsMapping(write({ rules: [{ profile: 'default', role: 'root' }] }))).toThrow(BadRequestError);
  });
});

describe('the NATS user of each role', () => {
  it("gives an agent exactly deploy/nats.conf's agent permissions, on its own inbox", () => {
    const conf = readFileSync(deployConf, 'utf8');
    const agentBlock = conf.slice(conf.indexOf('user: agent\n'), conf.indexOf('user: agent-2'));
    const publish = agentBlock.slice(agentBlock.indexOf('publish:'), agentBlock.indexOf('subscribe:'));
    const published = [...publish.matchAll(/"(system\.[^"]+)"/g)].map((m) => m[1]);
    expect([...AGENT_OPS].sort()).toEqual(published.sort());
    const user = roleUser('agent', 'agent:alpha');
    expect(user).toEqual({
      account: 'AGENTS',
      inboxPrefix: '_INBOX_oidc-agent:alpha',
      permissions: {
        pub: { allow: [...AGENT_OPS], deny: [] },
        sub: { allow: ['_INBOX_oidc-agent:alpha.>', 'system.tools.events.changed'], deny: [] },
      },
    });
  });

  it('gives the operator the static operator’s permissions and inbox', () => {
    const conf = readFileSync(deployConf, 'utf8');
    const block = conf.slice(conf.indexOf('user: operator'), conf.indexOf('# One NATS user per mount'));
    const user = roleUser('operator', 'ops:carol');
    for (const subject of [...(user.permissions.pub.allow ?? []), ...(user.permissions.sub.allow ?? [])])
      expect(block).toContain(`"${subject}"`);
    expect(user.inboxPrefix).toBe('_INBOX_operator');
  });

  it('gives every principal an inbox no other principal’s covers', () => {
    expect(inboxPrefixOf('agent:alpha')).toBe('_INBOX_oidc-agent:alpha');
    // Never a static user's or a shared inbox: mounts answer the service on _INBOX_targets.
    for (const shared of ['targets', 'operator', 'agent', 'service'])
      expect(inboxPrefixOf(shared)).toBe(`_INBOX_oidc-${shared}`);
    // A principal shaped like another's hash is hashed too, so it cannot take that inbox.
    const hashed = inboxPrefixOf('a.b').slice('_INBOX_oidc-'.length);
    expect(inboxPrefixOf(hashed)).not.toBe(inboxPrefixOf('a.b'));
    // A dot, a wildcard or a space would make the prefix cover, or miss, other subjects: hashed.
    for (const principal of ['alice@example.com', 'a.b', 'a*', 'a >', hashed]) {
      const prefix = inboxPrefixOf(principal);
      expect(prefix).toMatch(/^_INBOX_oidc-[0-9a-f]{32}$/);
    }
    expect(inboxPrefixOf('a.b')).not.toBe(inboxPrefixOf('a_b'));
    expect(inboxPrefixOf('a.b')).not.toBe(inboxPrefixOf('a.c'));
  });
});
