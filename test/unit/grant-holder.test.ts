/**
 * A grant bound to its holder's NATS user (`nats.user`, `nats.account`) holds only where the last
 * `Nats-Request-Info` names that user in that account, as nats-server appends it to a request
 * that crossed a service import with `share: true`; a grant bound by `nats.inbox` only holds for
 * reply subjects under that prefix. Each refusal is `wrong_holder`; the check reads the headers
 * only, and parses `Nats-Request-Info` only for a grant that names a user.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAccount } from '@nats-io/nkeys';
import { describe, expect, it } from 'vitest';
import { grant as mint } from '../../src/cli/grant.js';
import { UsageError } from '../../src/cli/output.js';
import { IdentityGate } from '../../src/identity/gate.js';
import { holderInbox, readGrantClaims } from '../../src/identity/granted.js';
import { mintGrant } from '../../src/identity/mint.js';
import { memoryOutput } from '../harness/cli.js';

const issuer = createAccount();
const gate = IdentityGate.forIssuers([issuer.getPublicKey()]);
const spec = { principal: 'agent:a', session: 's-1', resolve: { profile: 'default' }, ttlSeconds: 3600 };
/** What nats-server 2.9.10 appends for user `agent` of account AGENTS (its bytes, as captured). */
const info = (acc: string, user: string) =>
  `{"start":"2026-12-02T01:10:43.748671376Z","host":"127.0.0.1","id":7,"acc":"${acc}","user":"${user}","name":"bridge","lang":"nats.js","ver":"3.4.0","rtt":1178734,"server":"NCXYED7AQMHP256GVSV3LPML3SYZLPHQUG6CFFMJTZOTHQA4MKT4ST6J","kind":"Client","client_type":"nats"}`;
const REPLY = '_R_.pKiPSx.Graitl';

/** The version of a server with the fixes for CVE-2026-33223 and CVE-2026-33246, whose Nats-Request-Info is trusted. */
const FIXED = '2.15.3';

/** What `checkGrant` says on a server of `server`'s version: 'ok', or the failure it names. */
function check(grant: string, reply: string | undefined, requestInfo?: string, server = FIXED, by = gate): string {
  try {
    by.checkGrant({ grant }, reply, requestInfo, server);
    return 'ok';
  } catch (err) {
    return String((err as { details?: { grant?: string } }).details?.grant);
  }
}

describe('a grant bound to its NATS user', () => {
  const bound = mintGrant(issuer, { ...spec, user: 'agent', account: 'AGENTS' });

  it('holds where the server attests its user in its account, whatever the reply subject', () => {
    expect(check(bound, REPLY, info('AGENTS', 'agent'))).toBe('ok');
    expect(check(bound, '_INBOX_whatever.x', info('AGENTS', 'agent'))).toBe('ok');
  });

  it('is refused (wrong_holder) to another user, another account, or where nothing is attested', () => {
    expect(check(bound, REPLY, info('AGENTS', 'agent-2'))).toBe('wrong_holder');
    expect(check(bound, REPLY, info('MATRIX', 'agent'))).toBe('wrong_holder');
    expect(check(bound, REPLY, undefined)).toBe('wrong_holder');
    expect(check(bound, '_INBOX_agent.x', undefined)).toBe('wrong_holder');
    for (const unreadable of ['', 'not json', 'null', '"agent"', '[]', `${info('AGENTS', 'agent')}x`])
      expect(check(bound, REPLY, unreadable), unreadable).toBe('wrong_holder');
    // A name the client chose is escaped in the server's JSON: it cannot pose as the user field.
    const posing = JSON.stringify({ acc: 'AGENTS', name: '","user":"agent","acc":"AGENTS', user: 'agent-2' });
    expect(check(bound, REPLY, posing)).toBe('wrong_holder');
    const prefix = JSON.stringify({ acc: 'AGENTS', user: 'agent-2x' });
    expect(check(mintGrant(issuer, { ...spec, user: 'agent-2', account: 'AGENTS' }), REPLY, prefix)).toBe(
      'wrong_holder',
    );
    // What nats-server 2.9.10 makes of a block a client left unterminated: its own value joined
    // to the client's last line (here a forged Nats-Request-Info), which is then no JSON.
    const joined = `{"acc":"AGENTS","user":"agent"}Nats-Request-Info: ${info('AGENTS', 'agent-2')}`;
    expect(check(bound, REPLY, joined)).toBe('wrong_holder');
    // A ClientInfo past 4 KiB is none nats-server writes: not read at all.
    const padded = info('AGENTS', 'agent').replace('"host"', `"pad":"${'x'.repeat(5_000)}","host"`);
    expect(check(bound, REPLY, padded)).toBe('wrong_holder');
  });

  it('names the holder and the attested sender in its refusal, and the grant’s principal and session', () => {
    let refusal: { message?: string; subject?: string; session?: string } = {};
    try {
      gate.checkGrant({ grant: bound }, REPLY, info('AGENTS', 'agent-2'), FIXED);
    } catch (err) {
      refusal = err as typeof refusal;
    }
    expect(refusal.message).toContain('bound to NATS user agent of account AGENTS');
    expect(refusal.message).toContain('sender is user "agent-2" of account "AGENTS"');
    expect(refusal).toMatchObject({ subject: 'agent:a', session: 's-1' });
  });

  it('without an account, holds for that user in any account', () => {
    const anyAccount = mintGrant(issuer, { ...spec, user: 'agent' });
    expect(check(anyAccount, REPLY, info('OTHER', 'agent'))).toBe('ok');
    expect(check(anyAccount, REPLY, info('OTHER', 'agent-2'))).toBe('wrong_holder');
  });

  it('checks the user, not the inbox, where it names both: across an import the reply subject is the server’s', () => {
    const both = mintGrant(issuer, { ...spec, user: 'agent', account: 'AGENTS', inbox: '_INBOX_agent' });
    expect(check(both, REPLY, info('AGENTS', 'agent'))).toBe('ok');
    expect(check(both, '_INBOX_agent.x', info('AGENTS', 'agent-2'))).toBe('wrong_holder');
  });
});

describe('a grant bound to its NATS user, on a server that cannot vouch for the sender', () => {
  const bound = mintGrant(issuer, { ...spec, user: 'agent', account: 'AGENTS' });
  const holder = info('AGENTS', 'agent');

  it('is refused (unsafe_server) from its holder on a server without both fixes, or of no version', () => {
    for (const server of ['2.12.5', '2.11.14', '2.10.29', '2.9.10', '2.12.6-RC.1', 'not a version', ''])
      expect(check(bound, REPLY, holder, server), server).toBe('unsafe_server');
    expect(() => gate.checkGrant({ grant: bound }, REPLY, holder, undefined)).toThrow(/no version/);
    for (const server of ['2.11.15', '2.12.6', '2.13.0', '2.14.10', '2.15.3', 'v3.0.0'])
      expect(check(bound, REPLY, holder, server), server).toBe('ok');
  });

  it('names CVE-2026-33223 and the way out in its refusal', () => {
    expect(() => gate.checkGrant({ grant: bound }, REPLY, holder, '2.12.5')).toThrow(
      /nats-server 2\.12\.5 lacks the fixes for CVE-2026-33223 and CVE-2026-33246.*--allow-unsafe-nats/,
    );
  });

  it('is served there with allowUnsafeNats, still only to the user the server names', () => {
    const unsafe = IdentityGate.forIssuers([issuer.getPublicKey()], { allowUnsafeNats: true });
    expect(check(bound, REPLY, holder, '2.9.10', unsafe)).toBe('ok');
    expect(check(bound, REPLY, info('AGENTS', 'agent-2'), '2.9.10', unsafe)).toBe('wrong_holder');
  });

  it('leaves grants bound by inbox, or unbound, alone: they do not rest on Nats-Request-Info', () => {
    expect(check(mintGrant(issuer, { ...spec, inbox: '_INBOX_agent' }), '_INBOX_agent.x', undefined, '2.9.10')).toBe(
      'ok',
    );
    expect(check(mintGrant(issuer, spec), REPLY, undefined, '2.9.10')).toBe('ok');
  });
});

describe('a grant bound to an inbox prefix only', () => {
  const inboxBound = mintGrant(issuer, { ...spec, inbox: '_INBOX_agent' });

  it('holds for its replies, whatever Nats-Request-Info says, and says why an import’s reply fails', () => {
    expect(check(inboxBound, '_INBOX_agent.abc', undefined)).toBe('ok');
    expect(check(inboxBound, '_INBOX_agent-2.abc', info('AGENTS', 'agent'))).toBe('wrong_holder');
    expect(() => gate.checkGrant({ grant: inboxBound }, REPLY, info('AGENTS', 'agent'), FIXED)).toThrow(/--user/);
  });

  it('an unbound grant holds for any sender', () => {
    expect(check(mintGrant(issuer, spec), REPLY, info('AGENTS', 'agent-2'))).toBe('ok');
  });
});

describe('matrix-tools grant --user', () => {
  const seed = join(mkdtempSync(join(tmpdir(), 'grant-holder-')), 'issuer.nk');
  writeFileSync(seed, `${new TextDecoder().decode(issuer.getSeed())}\n`);
  let notes: string[] = [];
  const minted = (more: Record<string, string>) => {
    const out = memoryOutput();
    notes = out.notes;
    mint(
      {
        issuer: seed,
        principal: 'agent:a',
        session: 's-1',
        ttl: '1h',
        profile: 'default',
        account: 'AGENTS',
        ...more,
      } as never,
      out,
      {},
    );
    return readGrantClaims(out.printed.join(''));
  };

  it('binds the grant to that user of account AGENTS (or --account), whose inbox prefix clients then take', () => {
    const claims = minted({ user: 'agent' });
    expect(claims.nats).toMatchObject({ user: 'agent', account: 'AGENTS' });
    expect(claims.nats.inbox).toBeUndefined();
    expect(holderInbox(claims)).toBe('_INBOX_agent');
    expect(minted({ user: 'bot-7', account: 'BOTS' }).nats).toMatchObject({ user: 'bot-7', account: 'BOTS' });
    expect(holderInbox(minted({ user: 'agent', inbox: '_INBOX_mine' }))).toBe('_INBOX_mine');
    expect(notes).toEqual([]);
    // Without --user, no account is written: it would bind nothing; and it says the grant is a bearer token.
    expect(minted({}).nats.account).toBeUndefined();
    expect(notes.join('')).toContain('bound to no holder: whoever copies it is served as agent:a');
  });

  it('refuses a user or account that is no NATS name', () => {
    expect(() => minted({ user: 'a b' })).toThrow(UsageError);
    expect(() => minted({ user: 'agent', account: 'A"B' })).toThrow(UsageError);
  });
});
