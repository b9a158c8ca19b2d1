/** Canonical JSON (keys sorted, `undefined` left out) and its SHA-256, for digests and equality. */
import * as crypto from 'node:crypto';

/** JSON text with object keys in code-point order at every depth. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  const entries = Object.keys(value)
    .sort()
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
  return `{${entries.join(',')}}`;
}

/** SHA-256, hex, of the canonical JSON of a value. */
export function digestOf(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}

// One-shot hashing (Node ≥ 20.12) skips the Hash object; older versions stream.
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'hex') => string }).hash;

/** SHA-256, hex, of a string. */
export function sha256Hex(text: string): string {
  return oneShot !== undefined ? oneShot('sha256', text, 'hex') : crypto.createHash('sha256').update(text).digest('hex');
}
