/**
 * A minimal OpenID issuer on loopback: a discovery document, a JWKS with one ES256 key, and a
 * signer for tokens with any header and claims. For what a real IdP under test (test/harness/oidc.ts,
 * oidc-provider) never issues but others do: a token without `iat`, a header `typ` of `JWT`, none,
 * or one that is no access token's.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';

/** A running minimal issuer. */
export interface JwksIssuer {
  /** Its identifier, as its tokens' `iss` and its discovery document name it. */
  issuer: string;
  /** A token with these claims (`iss` and `aud` set), its header `typ` as given (`at+jwt` by default; null: none). */
  sign(claims: Record<string, unknown>, options?: { audience?: string; typ?: string | null }): Promise<string>;
  stop(): Promise<void>;
}

/** Starts one on a free loopback port; `audience` is its tokens' default `aud`. */
export async function startJwksIssuer(audience: string): Promise<JwksIssuer> {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  let issuer = '';
  const server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url === '/.well-known/openid-configuration')
      return res.end(JSON.stringify({ issuer, jwks_uri: `${issuer}/jwks` }));
    if (req.url === '/jwks') return res.end(JSON.stringify({ keys: [jwk] }));
    res.writeHead(404).end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    issuer,
    sign: (claims, options = {}) => {
      const typ = options.typ === undefined ? 'at+jwt' : options.typ;
      const header = typ === null ? { alg: 'ES256', kid: 'k1' } : { alg: 'ES256', kid: 'k1', typ };
      return new SignJWT(claims)
        .setProtectedHeader(header)
        .setIssuer(issuer)
        .setAudience(options.audience ?? audience)
        .sign(privateKey);
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
