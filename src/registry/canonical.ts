/** Canonical JSON (keys sorted, `undefined` left out) and its SHA-256, for digests and equality. */
import { sha256Hex } from '../bus/codec.js';

/** Canonical texts a caller already holds (for objects it knows do not change): `undefined` for others. */
export type KnownTexts = (value: object) => string | undefined;

/**
 * JSON text with object keys in code-point order at every depth. Built by appending, not with
 * arrays of parts: every uncached `$resolve` digests its whole reply with it. `known` gives the
 * text of objects whose text was made before (the registry's resolved tools), taken as is.
 */
export function canonicalJson(value: unknown, known?: KnownTexts): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  const text = known?.(value);
  if (text !== undefined) return text;
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      out += `${i === 0 ? '' : ','}${v === undefined ? 'null' : canonicalJson(v, known)}`;
    }
    return `${out}]`;
  }
  let out = '{';
  for (const k of Object.keys(value).sort()) {
    const v = (value as Record<string, unknown>)[k];
    if (v === undefined) continue;
    out += `${out.length === 1 ? '' : ','}${JSON.stringify(k)}:${canonicalJson(v, known)}`;
  }
  return `${out}}`;
}

/** SHA-256, hex, of the canonical JSON of a value. */
export function digestOf(value: unknown, known?: KnownTexts): string {
  return sha256Hex(canonicalJson(value, known));
}
