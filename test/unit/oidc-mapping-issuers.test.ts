/**
 * The claims mapping's issuers and principal claim (contracts/oidc-mapping.json): a subject is
 * unique only within its issuer, so two trusted issuers need two principal prefixes, none
 * beginning another, or the mapping is refused; an issuer's entry replaces what it names of the
 * top level; and an `email` names who acts only when the token says it is verified.
 */
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BadRequestError } from '../../src/bus/errors.js';
import {
  type ClaimsMapping,
  issuerNamespaceProblem,
  loadClaimsMapping,
  mapClaims,
  mappingFor,
} from '../../src/identity/oidc/mapping.js';

const A = 'https://corp.example/';
const B = 'https://partner.example/';
const rules = [{ profile: 'default' }];

describe('the claims mapping of several issuers', () => {
  it('lets one issuer have any prefix, and two only prefixes that do not begin one another', () => {
    expect(issuerNamespaceProblem({ rules }, [A])).toBeUndefined();
    expect(issuerNamespaceProblem({ rules }, [A, B])).toMatch(/share principals/);
    const shared: ClaimsMapping = { principal: { prefix: 'agent:' }, rules };
    expect(issuerNamespaceProblem(shared, [A, B])).toMatch(/own principal prefix/);
    const own = (prefix: string): ClaimsMapping => ({ ...shared, issuers: { [B]: { principal: { prefix } } } });
    expect(issuerNamespaceProblem(own('partner:'), [A, B])).toBeUndefined();
    expect(issuerNamespaceProblem(own('agent:p:'), [A, B])).toMatch(/"agent:" and "agent:p:"/);
    expect(issuerNamespaceProblem(own('agent'), [A, B])).toMatch(/share principals/);
    // An entry for an issuer not trusted here is let be: one file serves serve, mcp and auth-callout.
    expect(issuerNamespaceProblem(own('partner:'), [A])).toBeUndefined();
  });

  it("maps each issuer's tokens with its own entry, the top level where it names nothing", () => {
    const mapping: ClaimsMapping = {
      principal: { claim: 'client_id', prefix: 'agent:' },
      session: { claim: 'sid' },
      rules,
      issuers: { [B]: { principal: { prefix: 'partner:' }, rules: [{ profile: 'partner' }] } },
    };
    expect(mappingFor(mapping, A)).toBe(mapping);
    expect(mappingFor(mapping, B)).toEqual({
      principal: { prefix: 'partner:' },
      session: { claim: 'sid' },
      rules: [{ profile: 'partner' }],
    });
    expect(mapClaims({ sub: 'alpha' }, mappingFor(mapping, B))).toMatchObject({
      principal: 'partner:alpha',
      authority: { profile: 'partner' },
    });
  });

  it('reads a mapping file with issuers, and refuses a tokenType other than at+jwt', () => {
    const write = (body: unknown) => {
      const path = join(tmpdir(), `oidc-mapping-${process.pid}-${Math.random().toString(36).slice(2)}.json`);
      writeFileSync(path, JSON.stringify(body));
      return path;
    };
    const good = { rules, issuers: { [B]: { principal: { prefix: 'partner:' }, tokenType: 'at+jwt' } } };
    expect(loadClaimsMapping(write(good))).toEqual(good);
    expect(() => loadClaimsMapping(write({ rules, issuers: { [B]: { tokenType: 'JWT' } } }))).toThrow(BadRequestError);
    expect(() => loadClaimsMapping(write({ rules, issuers: { [B]: { prefix: 'p:' } } }))).toThrow(BadRequestError);
  });
});

describe('the email claim as the principal', () => {
  const mapping: ClaimsMapping = { principal: { claim: 'email', prefix: 'user:' }, rules };

  it('is taken only with email_verified true', () => {
    expect(mapClaims({ email: 'ana@example.com', email_verified: true }, mapping)).toMatchObject({
      principal: 'user:ana@example.com',
    });
    for (const verified of [false, 'true', undefined])
      expect(mapClaims({ email: 'ana@example.com', email_verified: verified }, mapping)).toMatch(
        /email_verified is not true/,
      );
  });

  it('does not ask for email_verified of another claim', () => {
    expect(mapClaims({ sub: 'ana' }, { rules })).toMatchObject({ principal: 'ana' });
  });
});
