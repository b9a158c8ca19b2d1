/**
 * The JWT form of grants, exactly as NATS writes its JWTs (and `@nats-io/jwt`'s `encode`):
 * `<b64url header>.<b64url claims>.<b64url ed25519 signature of the first two parts>`, header
 * `{"typ":"JWT","alg":"ed25519-nkey"}`, `jti` = base64 SHA-512 of the claims before it.
 * Written here rather than taken from `@nats-io/jwt` because its `encode` runs the JSON through
 * `btoa`: a principal with a character past U+00FF throws, one in U+0080–U+00FF is written as
 * Latin-1 instead of UTF-8. For ASCII claims the bytes are the same.
 */
import { createHash } from 'node:crypto';
import type { KeyPair } from '@nats-io/nkeys';
import { jsonShapeViolation, type ShapeBounds } from '../bus/codec.js';
import { MAX_GRANT_LENGTH } from '../bus/headers.js';
import { GrantError } from './errors.js';
import { GRANT_HEADER, GRANT_VERSION, type GrantClaims, GrantFailure } from './types.js';

/** Longest grant text read, in characters: the `Matrix-Grant` header's own bound. */
export { MAX_GRANT_LENGTH };

const SEGMENT = /^[A-Za-z0-9_-]+$/;

/** A grant split into its parts, nothing checked but its form. */
export interface GrantParts {
  header: Record<string, unknown>;
  claims: Record<string, unknown>;
  /** `<header>.<claims>` as bytes: what the signature signs. */
  signed: Buffer;
  signature: Buffer;
}

const malformed = (why: string) => new GrantError(GrantFailure.Malformed, `Matrix-Grant is malformed: ${why}`);

/** A grant split into its parts, its claims not read yet. */
export interface SignedParts {
  header: Record<string, unknown>;
  /** The claims' base64url segment, as it came. */
  claimsSegment: string;
  /** `<header>.<claims>` as bytes: what the signature signs. */
  signed: Buffer;
  signature: Buffer;
}

/** Splits and decodes a grant; a `malformed` GrantError when it is not a NATS JWT. */
export function splitGrant(text: string): GrantParts {
  const { header, claimsSegment, signed, signature } = splitSigned(text);
  return { header, claims: readClaims(claimsSegment), signed, signature };
}

/**
 * Splits a grant and decodes all but its claims (the part whose size and shape its sender
 * chooses): what checking its signature needs. A `malformed` GrantError when it is not a NATS JWT.
 */
export function splitSigned(text: string): SignedParts {
  if (text.length > MAX_GRANT_LENGTH) throw malformed(`it is ${text.length} characters, more than ${MAX_GRANT_LENGTH}`);
  const parts = text.split('.');
  if (parts.length !== 3 || !parts.every((p) => SEGMENT.test(p)))
    throw malformed('it is not three base64url parts joined by dots');
  const [h, c, s] = parts as [string, string, string];
  // The signature first: it is the cheapest part to check, and a flood of grants that fail here costs no JSON.
  const signature = Buffer.from(s, 'base64url');
  if (signature.length !== 64) throw malformed(`its signature is ${signature.length} bytes, not the 64 of ed25519`);
  // One text per signature: the last of its 86 characters has 4 bits the 64 bytes do not use, and a
  // grant whose spare bits are set would be another text (another cache entry) of the same grant.
  if (signature.toString('base64url') !== s) throw malformed('its signature is not in canonical base64url');
  const header = jsonObject(h, 'header');
  if (header.alg !== GRANT_HEADER.alg || (header.typ !== 'JWT' && header.typ !== 'jwt')) {
    throw malformed(
      `its header must be {"typ":"JWT","alg":"ed25519-nkey"}, not ${JSON.stringify(header).slice(0, 100)}`,
    );
  }
  return { header, claimsSegment: c, signed: Buffer.from(`${h}.${c}`), signature };
}

/**
 * The claims of a grant's base64url segment; a `malformed` GrantError when they are not a JSON
 * object of the grant's shape.
 */
export function readClaims(segment: string): Record<string, unknown> {
  return jsonObject(segment, 'claims');
}

/**
 * The shape a grant's header and claims may have, judged from their bytes before they are
 * parsed (a grant's own nest 4 deep: claims, nats, resolve, a list; its widest object, the
 * claims, holds 8 fields; its lists at most 256 items, as the contracts bound them). What costs
 * a parse is an object of many keys: claims of one object of 1,300 keys (16 KiB) cost 0.7-1.6 ms
 * to parse, walk and hash (to tell tampering from a bad signature), ~10 times what the same bytes
 * cost as objects of at most 32.
 */
export const GRANT_SHAPE: ShapeBounds = { maxDepth: 16, maxMapEntries: 32, maxArrayItems: 256, maxValues: 16_384 };

function jsonObject(segment: string, what: string): Record<string, unknown> {
  const bytes = Buffer.from(segment, 'base64url');
  const shape = jsonShapeViolation(bytes, GRANT_SHAPE);
  if (shape !== undefined)
    // "its claims nest …", "its header nests …".
    throw malformed(`its ${what} ${what === 'claims' ? shape.message.replace(/^(nest|hold)s/, '$1') : shape.message}`);
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw malformed(`its ${what} is not base64url JSON`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw malformed(`its ${what} is not a JSON object`);
  return value as Record<string, unknown>;
}

/** `jti` as NATS JWTs carry it: base64 SHA-512 of the JSON of every other claim, in order. */
export function claimsHash(claims: Record<string, unknown>): string {
  const { jti: _jti, ...rest } = claims;
  return createHash('sha512').update(JSON.stringify(rest)).digest('base64');
}

/** The claims a minter chooses; `iss`, `iat`, `jti` and `nats.version` are added when signing. */
export type UnsignedClaims = Omit<GrantClaims, 'iss' | 'iat' | 'jti' | 'nats'> & {
  nats: Omit<GrantClaims['nats'], 'version'>;
};

/** Signs claims with an issuer's key pair, the way `@nats-io/jwt`'s `encode` does (in UTF-8). */
export function encodeGrant(unsigned: UnsignedClaims, issuer: KeyPair, now = Date.now()): string {
  const claims: Record<string, unknown> = {
    ...unsigned,
    nats: { ...unsigned.nats, version: GRANT_VERSION },
    iss: issuer.getPublicKey(),
    iat: Math.floor(now / 1000),
  };
  claims.jti = claimsHash(claims);
  const signed = `${Buffer.from(JSON.stringify(GRANT_HEADER)).toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
  return `${signed}.${Buffer.from(issuer.sign(Buffer.from(signed))).toString('base64url')}`;
}
