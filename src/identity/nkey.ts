/**
 * Public nkeys as `node:crypto` keys. An nkey is base32 (RFC 4648, no padding) of a prefix
 * byte, the 32-byte ed25519 public key and a CRC-16 (XMODEM); `fromPublic` checks all of it,
 * the raw bytes become an ed25519 `KeyObject` once, and every signature is verified natively.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { fromPublic } from '@nats-io/nkeys';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** Decodes unpadded base32; throws on a character outside the alphabet. */
function base32Decode(text: string): Uint8Array {
  const out = new Uint8Array(Math.floor((text.length * 5) / 8));
  let bits = 0;
  let value = 0;
  let index = 0;
  for (const ch of text) {
    const digit = ALPHABET.indexOf(ch);
    if (digit < 0) throw new Error(`'${ch}' is not base32`);
    value = (value << 5) | digit;
    bits += 5;
    if (bits >= 8) {
      out[index++] = (value >>> (bits - 8)) & 0xff;
      bits -= 8;
    }
  }
  return out;
}

/**
 * The ed25519 public key of a public nkey (account `A…`, operator `O…`, user `U…`, …), for
 * `crypto.verify`; throws with a readable message when the text is no valid public nkey.
 */
export function nkeyPublicKey(nkey: string): KeyObject {
  try {
    fromPublic(nkey); // checks the prefix, the length and the CRC
  } catch (err) {
    throw new Error(`'${nkey}' is not a public nkey (${(err as Error).message})`);
  }
  const raw = base32Decode(nkey).subarray(1, 33);
  return createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(raw).toString('base64url') },
    format: 'jwk',
  });
}
