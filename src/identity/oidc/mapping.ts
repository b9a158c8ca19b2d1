/**
 * The claims mapping (`contracts/oidc-mapping.json`): how an access token of a trusted issuer
 * becomes a session, the same model a grant has. Pure: claims in, principal, session and
 * authority out, or undefined when no rule matches (the token is then refused).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { contracts, SchemaId } from '../../bus/contracts.js';
import { BadRequestError } from '../../bus/errors.js';
import type { ApproveClaim, GrantAuthority } from '../types.js';
import { PRINCIPAL, SESSION_ID } from '../verify.js';

/**
 * What a token's holder is on NATS when it connects through auth callout (PROTOCOL 14): each role
 * has the least privilege `deploy/nats.conf` gives its kind of user.
 */
export const NATS_ROLES = ['agent', 'approver', 'operator', 'host'] as const;
/** One of `NATS_ROLES`. */
export type NatsRole = (typeof NATS_ROLES)[number];

/** A mapping file, as `contracts/oidc-mapping.json` has it. */
export interface ClaimsMapping {
  /**
   * The claim naming who acts (default `sub`) and a prefix before it (default none). The claim
   * must be one the IdP never lets its holder change (`sub`, Entra ID's `oid`); `email` is taken
   * only with `email_verified: true`.
   */
  principal?: PrincipalMapping;
  /** The claim naming the session (default `sid`, else `jti`). */
  session?: { claim?: string };
  /** Tried in order; the first whose `when` matches decides. */
  rules: MappingRule[];
  /**
   * Issuer (its `iss`, exactly) → what differs for its tokens; each field it names replaces the
   * top-level one. With more than one trusted issuer, each needs its own principal prefix.
   */
  issuers?: Record<string, IssuerMapping>;
}

/** Who acts: a claim and a prefix before its value. */
export interface PrincipalMapping {
  /** The claim; default `sub`. */
  claim?: string;
  /** Put before the claim's value; default none. */
  prefix?: string;
}

/** One issuer's part of a mapping file. */
export interface IssuerMapping {
  /** Replaces the top-level `principal` for this issuer's tokens. */
  principal?: PrincipalMapping;
  /** Replaces the top-level `session`. */
  session?: { claim?: string };
  /** Replace the top-level `rules`. */
  rules?: MappingRule[];
  /**
   * `at+jwt`: a token of this issuer must say `typ: at+jwt` (RFC 9068), so no ID token passes
   * for an access token; default: any `typ` a JWT access token is sent with (none, `JWT`, `at+jwt`).
   */
  tokenType?: 'at+jwt';
}

/** One rule: the claims it matches, and what a token matching them may do. */
export interface MappingRule extends GrantAuthority {
  /** Claim → value or values; each claim named must hold one of them. Absent: every token. */
  when?: Record<string, string | string[]>;
  /** Approve rights, as a grant's `nats.approve`. */
  approve?: ApproveClaim;
  /** Its NATS user's role under auth callout; default `agent` (the least privilege). */
  role?: NatsRole;
}

/** What a token maps to. */
export interface MappedToken {
  principal: string;
  session: string;
  authority: GrantAuthority;
  approve?: ApproveClaim;
  /** The rule's role, `agent` where it names none. */
  role: NatsRole;
}

/** Reads and checks a mapping file; `BadRequestError` naming each violation. */
export function loadClaimsMapping(path: string): ClaimsMapping {
  let mapping: unknown;
  try {
    mapping = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new BadRequestError(`cannot read the OIDC claims mapping ${path}: ${(err as Error).message}`);
  }
  const violations = contracts().check(SchemaId.OidcMapping)(mapping);
  if (violations !== undefined)
    throw new BadRequestError(
      `the OIDC claims mapping ${path} is invalid: ${violations.map((v) => `${v.path} ${v.message}`).join('; ')}`,
      { details: { violations } },
    );
  return mapping as ClaimsMapping;
}

/**
 * The mapping for one issuer's tokens: the top-level one, with what its `issuers` entry names
 * in place of the top-level fields.
 */
export function mappingFor(mapping: ClaimsMapping, issuer: string): ClaimsMapping {
  const own = ownMapping(mapping, issuer);
  if (own === undefined) return mapping;
  const effective: ClaimsMapping = { rules: own.rules ?? mapping.rules };
  const principal = own.principal ?? mapping.principal;
  if (principal !== undefined) effective.principal = principal;
  const session = own.session ?? mapping.session;
  if (session !== undefined) effective.session = session;
  return effective;
}

/**
 * Why `mapping` cannot serve these issuers together, or undefined when it can. A subject is unique
 * only within its issuer (OpenID Connect Core 2, `sub`), so with more than one issuer each must put
 * its own prefix before its principals, and no prefix may begin another (`agent:` and `agent:p:`
 * would make one issuer's `p:alpha` the other's `alpha`). An `issuers` entry for an issuer not
 * trusted here is let be: one mapping file serves `serve`, `mcp` and `auth-callout` alike.
 */
export function issuerNamespaceProblem(mapping: ClaimsMapping, issuers: readonly string[]): string | undefined {
  if (issuers.length < 2) return undefined;
  const prefixes = issuers.map((iss) => ({ iss, prefix: mappingFor(mapping, iss).principal?.prefix ?? '' }));
  for (const a of prefixes)
    for (const b of prefixes)
      if (a !== b && b.prefix.startsWith(a.prefix))
        return (
          `${issuers.length} OIDC issuers are trusted, and ${a.iss} and ${b.iss} would share principals ` +
          `(prefixes ${JSON.stringify(a.prefix)} and ${JSON.stringify(b.prefix)}): a subject is unique only within its issuer, ` +
          `so give each issuer its own principal prefix in the claims mapping, none beginning another ` +
          `({"issuers": {"${b.iss}": {"principal": {"prefix": "partner:"}}}})`
        );
  return undefined;
}

/** The `typ` a token of `issuer` must have: `at+jwt`, or undefined for any an access token is sent with. */
export function tokenTypeFor(mapping: ClaimsMapping, issuer: string): 'at+jwt' | undefined {
  return ownMapping(mapping, issuer)?.tokenType;
}

function ownMapping(mapping: ClaimsMapping, issuer: string): IssuerMapping | undefined {
  return mapping.issuers !== undefined && Object.hasOwn(mapping.issuers, issuer) ? mapping.issuers[issuer] : undefined;
}

/**
 * The session a token's claims map to, or a reason it maps to none: no rule matches, or its
 * principal claim is missing or no principal, or it is an `email` the token does not say is
 * verified (anyone who may set their own address at the IdP would otherwise act as its owner).
 */
export function mapClaims(claims: Record<string, unknown>, mapping: ClaimsMapping): MappedToken | string {
  const rule = mapping.rules.find((r) => matches(r.when, claims));
  if (rule === undefined) return 'no rule of the claims mapping matches its claims';
  const principalClaim = mapping.principal?.claim ?? 'sub';
  const value = claims[principalClaim];
  if (typeof value !== 'string' || value === '') return `it has no ${principalClaim} claim to name who acts`;
  if (principalClaim === 'email' && claims.email_verified !== true)
    return "its email names who acts, and its email_verified is not true (an address not verified is anyone's)";
  const principal = `${mapping.principal?.prefix ?? ''}${value}`;
  if (!PRINCIPAL.test(principal))
    return `its ${principalClaim} is no principal (1 to 256 characters, no control characters)`;
  const mapped: MappedToken = {
    principal,
    session: sessionOf(claims, mapping),
    authority: authorityOf(rule),
    role: rule.role ?? 'agent',
  };
  if (rule.approve !== undefined) mapped.approve = rule.approve;
  return mapped;
}

/** Does every claim `when` names hold one of its values? */
function matches(when: MappingRule['when'], claims: Record<string, unknown>): boolean {
  for (const [name, wanted] of Object.entries(when ?? {})) {
    const held = valuesOf(name, claims[name]);
    const values = typeof wanted === 'string' ? [wanted] : wanted;
    if (!values.some((v) => held.includes(v))) return false;
  }
  return true;
}

/** A claim's values: a string (scope and scp split on spaces), or the strings of an array. */
function valuesOf(name: string, claim: unknown): string[] {
  if (typeof claim === 'string') return name === 'scope' || name === 'scp' ? claim.split(' ') : [claim];
  if (Array.isArray(claim)) return claim.filter((v): v is string => typeof v === 'string');
  if (typeof claim === 'boolean' || typeof claim === 'number') return [String(claim)];
  return [];
}

/** The session claim's value when it is a session id; else a hash of it (or of the token's identity). */
function sessionOf(claims: Record<string, unknown>, mapping: ClaimsMapping): string {
  const named = mapping.session?.claim;
  const value = named !== undefined ? claims[named] : (claims.sid ?? claims.jti);
  const text = typeof value === 'string' && value !== '' ? value : `${claims.iss}|${claims.sub}|${claims.iat}`;
  if (SESSION_ID.test(text)) return text;
  return `oidc-${createHash('sha256').update(text).digest('base64url').slice(0, 32)}`;
}

/** The authority part of a `$resolve` request a rule gives, its fields in a fixed order. */
function authorityOf(rule: MappingRule): GrantAuthority {
  const authority: GrantAuthority = { profile: rule.profile };
  if (rule.worker !== undefined) authority.worker = rule.worker;
  if (rule.skills !== undefined) authority.skills = rule.skills;
  if (rule.toolContextRefs !== undefined) authority.toolContextRefs = rule.toolContextRefs;
  if (rule.requires !== undefined) authority.requires = rule.requires;
  if (rule.environment !== undefined) authority.environment = rule.environment;
  return authority;
}
