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
  /** The claim naming who acts (default `sub`) and a prefix before it (default none). */
  principal?: { claim?: string; prefix?: string };
  /** The claim naming the session (default `sid`, else `jti`). */
  session?: { claim?: string };
  /** Tried in order; the first whose `when` matches decides. */
  rules: MappingRule[];
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
 * The session a token's claims map to, or a reason it maps to none: no rule matches, or its
 * principal claim is missing or no principal.
 */
export function mapClaims(claims: Record<string, unknown>, mapping: ClaimsMapping): MappedToken | string {
  const rule = mapping.rules.find((r) => matches(r.when, claims));
  if (rule === undefined) return 'no rule of the claims mapping matches its claims';
  const principalClaim = mapping.principal?.claim ?? 'sub';
  const value = claims[principalClaim];
  if (typeof value !== 'string' || value === '') return `it has no ${principalClaim} claim to name who acts`;
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
