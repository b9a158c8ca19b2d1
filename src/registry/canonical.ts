/** Canonical JSON (keys sorted, `undefined` left out) and its SHA-256, for digests and equality. */
import * as crypto from 'node:crypto';

/**
 * JSON text with object keys in code-point order at every depth. Built by appending, not with
 * arrays of parts: every uncached `$resolve` digests its whole reply with it.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      out += `${i === 0 ? '' : ','}${v === undefined ? 'null' : canonicalJson(v)}`;
    }
    return `${out}]`;
  }
  let out = '{';
  for (const k of Object.keys(value).sort()) {
    const v = (value as Record<string, unknown>)[k];
    if (v === undefined) continue;
    out += `${out.length === 1 ? '' : ','}${JSON.stringify(k)}:${canonicalJson(v)}`;
  }
  return `${out}}`;
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
