/** Random ids and reply tokens, drawn from one pool of random bytes: an id costs no syscall. */
import { randomFillSync } from 'node:crypto';

/**
 * 96 random bits as 16 base64url characters, from the same pool as reply tokens: an id that costs
 * no syscall.
 */
export function randomId(): string {
  return randomBase64url(12);
}

/** A `Matrix-Call-Id` of one request to a target (PROTOCOL 10): 96 random bits, 16 base64url characters. */
export function newCallId(): string {
  return randomId();
}

/** Random bytes, refilled a few KiB at a time: a reply token costs no syscall. */
const randomPool = Buffer.alloc(4096);
let randomAt = randomPool.length;

/**
 * A reply token: 48 random bits as 8 base64url characters, so a token seen on the wire tells
 * nothing of the next one (with counter tokens, one sniffed reply subject would let a caller aim
 * forged replies at the requests that follow it). A counter and 10 base-36 digits would be 4+
 * characters longer on every request and reply subject.
 */
export function randomToken(): string {
  return randomBase64url(6);
}

/** `bytes` random bytes of the pool as base64url. */
function randomBase64url(bytes: number): string {
  if (randomAt + bytes > randomPool.length) {
    randomFillSync(randomPool);
    randomAt = 0;
  }
  const text = randomPool.toString('base64url', randomAt, randomAt + bytes);
  randomAt += bytes;
  return text;
}
