/**
 * Grants signed by no one, each a text of its own (so no cache of refused texts ever holds one):
 * `chars` long, naming a trusted `iss`, claims of objects of `entries` keys each (as many as a
 * grant's objects may hold: the costliest JSON a grant may carry), a `jti` the claims do not hash
 * to (so the refusal tells tampered from badly signed), 64 random bytes for a signature. The
 * flooder process runs it as it is: plain erasable TypeScript, importing nothing of src/.
 */
import { randomBytes } from 'node:crypto';

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const header = b64({ typ: 'JWT', alg: 'ed25519-nkey' });

/** A maker of such grants: each call gives the next, another text. */
export function badGrants(iss: string, chars: number, entries: number): () => string {
  // The counter has 7 digits throughout, so every grant is as long as the first.
  let n = 1_000_000;
  const objects: Record<string, number>[] = [];
  const claims: Record<string, unknown> = {
    n,
    iss,
    sub: 'agent:flood',
    jti: 'not-its-hash',
    iat: 1,
    exp: 2,
    x: objects,
  };
  const length = () => `${header}.${b64(claims)}.`.length + 86;
  // Objects of `entries` keys, each key a name of its own, until the grant is `chars` long.
  for (let key = 0; length() <= chars; key++) {
    if (key % entries === 0) objects.push({});
    (objects.at(-1) as Record<string, number>)[`k${key}`] = 0;
  }
  const last = objects.at(-1) as Record<string, number>;
  delete last[Object.keys(last).at(-1) as string];
  return () => {
    claims.n = ++n;
    return `${header}.${b64(claims)}.${randomBytes(64).toString('base64url')}`;
  };
}
