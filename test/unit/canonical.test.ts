import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/registry/canonical.js';

/** The definition the digests were made with: parts sorted, filtered and joined. */
function byDefinition(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : byDefinition(v))).join(',')}]`;
  const entries = Object.keys(value)
    .sort()
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .map((k) => `${JSON.stringify(k)}:${byDefinition((value as Record<string, unknown>)[k])}`);
  return `{${entries.join(',')}}`;
}

describe('canonicalJson', () => {
  const values: unknown[] = [
    null,
    0,
    -1.5,
    'a"b\\c\u2028',
    true,
    [],
    {},
    [undefined, null, 1, 'x', [2, [3]], { b: 1, a: 2 }],
    { z: 1, a: undefined, é: 'accent', A: [{ y: undefined, x: null }], '': 0, '10': 1, '9': 2 },
    { only: undefined },
    { nested: { deeper: { deepest: [{}, [], ''] } }, f: () => 1 },
    { date: new Date(0), n: Number.NaN, inf: Number.POSITIVE_INFINITY },
  ];

  it('writes the same text as its definition, byte for byte (digests of stored replies stay valid)', () => {
    for (const value of values) expect(canonicalJson(value)).toBe(byDefinition(value));
  });

  it('orders keys by code point at every depth and leaves undefined out', () => {
    expect(canonicalJson({ b: { d: 1, c: [{ f: 1, e: undefined }] }, a: 0 })).toBe('{"a":0,"b":{"c":[{"f":1}],"d":1}}');
  });
});
