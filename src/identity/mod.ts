/** Identity on the bus: session grants (PROTOCOL 3.1), their verification, and minting. */
export { grantedRequest, sameValue } from './authorize.js';
export { DEFAULT_GRANT_CACHE_BYTES, GrantCache } from './cache.js';
export { GrantError } from './errors.js';
export { type Admitted, IdentityGate, parseIssuers } from './gate.js';
export { GrantedSession, loadGrant, type Presentation, readGrantClaims } from './granted.js';
export { claimsHash, encodeGrant, MAX_GRANT_LENGTH, splitGrant, type UnsignedClaims } from './jwt.js';
export { type GrantSpec, mintGrant, newIssuerKey, parseDuration, readIssuerSeed } from './mint.js';
export { nkeyPublicKey } from './nkey.js';
export * from './types.js';
export { GrantVerifier, type GrantVerifierOptions, SESSION_ID } from './verify.js';
