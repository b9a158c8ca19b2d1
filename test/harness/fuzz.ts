/** Reproducible malformed requests: a seeded generator of bodies that break the protocol in many ways. */
import { encode } from '@msgpack/msgpack';

/** A small, fast, seeded PRNG (mulberry32). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One malformed request: its kind, its body and whether it is sent as JSON. */
export interface FuzzCase {
  kind: string;
  body: Uint8Array;
  json: boolean;
}

const text = new TextEncoder();

/** The case generators; each takes the PRNG and a sample of a valid request for the op. */
const kinds: Record<string, (r: () => number, valid: Record<string, unknown>) => FuzzCase> = {
  'random bytes': (r) => ({
    kind: 'random bytes',
    json: false,
    body: Uint8Array.from({ length: 1 + Math.floor(r() * 300) }, () => Math.floor(r() * 256)),
  }),
  'truncated msgpack': (r, valid) => {
    const full = encode({ ...valid, pad: 'x'.repeat(20) });
    return {
      kind: 'truncated msgpack',
      json: false,
      body: full.subarray(0, Math.max(1, Math.floor(r() * (full.length - 1)))),
    };
  },
  'random JSON text': (r) => ({
    kind: 'random JSON text',
    json: true,
    body: text.encode(['{', '{"a":', '[1,2', 'null', '"str"', '{"x":}', '}{'][Math.floor(r() * 7)] as string),
  }),
  'deep nesting': (r, valid) => {
    const depth = 100 + Math.floor(r() * 5000);
    const key = firstKey(valid, r);
    if (r() < 0.5) {
      // JSON, by hand (stringifying it would overflow the stack): nested arrays and maps.
      let open = '';
      let close = '';
      for (let i = 0; i < depth; i++) {
        const array = r() < 0.5;
        open += array ? '[' : '{"d":';
        close = (array ? ']' : '}') + close;
      }
      return {
        kind: 'deep nesting',
        json: true,
        body: text.encode(`{${JSON.stringify(key)}:${open}"bottom"${close}}`),
      };
    }
    // MessagePack, by hand (encoders stop at depth 100): {key: [[[…nil…]]]}.
    const keyBytes = encode(key);
    const body = new Uint8Array(1 + keyBytes.length + depth + 1);
    body[0] = 0x81;
    body.set(keyBytes, 1);
    body.fill(0x91, 1 + keyBytes.length, 1 + keyBytes.length + depth);
    body[body.length - 1] = 0xc0;
    return { kind: 'deep nesting', json: false, body };
  },
  'huge string': (r, valid) => ({
    kind: 'huge string',
    json: false,
    body: encode({ ...valid, [firstKey(valid, r)]: 'h'.repeat(100_000 + Math.floor(r() * 800_000)) }),
  }),
  'huge array': (r, valid) => ({
    kind: 'huge array',
    json: false,
    body: encode({
      ...valid,
      [firstKey(valid, r)]: Array.from({ length: 10_000 + Math.floor(r() * 50_000) }, (_, i) => i),
    }),
  }),
  'wrong types': (r, valid) => {
    const wrong = [42, -1.5, true, null, [], 'text', { nested: 1 }, new Uint8Array([1, 2])];
    const body: Record<string, unknown> = { ...valid };
    const keys = Object.keys(body);
    if (keys.length === 0) body.unknown_field = 1;
    for (const k of keys) body[k] = wrong[Math.floor(r() * wrong.length)];
    body[`x${Math.floor(r() * 1e6)}`] = 'unknown';
    return { kind: 'wrong types', json: false, body: encode(body) };
  },
  'prototype keys': (r, valid) => {
    const key = ['__proto__', 'constructor', 'prototype'][Math.floor(r() * 3)] as string;
    const inner = `{"${key}": {"polluted": true}}`;
    const json = `{${Object.entries(valid)
      .map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`)
      .concat(`"${key}": {"polluted": true}`, `"nested": ${inner}`)
      .join(',')}}`;
    return { kind: 'prototype keys', json: true, body: text.encode(json) };
  },
  'not a map': (r) => ({
    kind: 'not a map',
    json: false,
    body: encode([[1, 2], 'string', 12, null, true][Math.floor(r() * 5)]),
  }),
};

function firstKey(valid: Record<string, unknown>, r: () => number): string {
  const keys = Object.keys(valid);
  return keys.length === 0 ? 'field' : (keys[Math.floor(r() * keys.length)] as string);
}

/** The case for draw `i` of a run seeded with `seed`. */
export function fuzzCase(r: () => number, valid: Record<string, unknown>): FuzzCase {
  const names = Object.keys(kinds);
  const make = kinds[names[Math.floor(r() * names.length)] as string] as (
    r: () => number,
    v: Record<string, unknown>,
  ) => FuzzCase;
  return make(r, valid);
}
