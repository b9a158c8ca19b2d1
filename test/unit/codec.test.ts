import { describe, expect, it } from 'vitest';
import { decodeMap, encodeBody, MAX_DEPTH, nestedDeeperThan } from '../../src/bus/codec.js';
import { BadRequestError } from '../../src/bus/errors.js';

/** `levels` maps and arrays, alternating, nested one in the other. */
function nested(levels: number): object {
  let value: object = {};
  for (let i = 1; i < levels; i++) value = i % 2 ? [value] : { a: value };
  return value;
}

describe('the nesting bound', () => {
  it('takes a body nested exactly as deep as allowed and refuses one level more', () => {
    expect(nestedDeeperThan(nested(MAX_DEPTH), MAX_DEPTH)).toBe(false);
    expect(nestedDeeperThan(nested(MAX_DEPTH + 1), MAX_DEPTH)).toBe(true);
    expect(() => decodeMap(encodeBody({ deep: nested(MAX_DEPTH + 1) }))).toThrow(BadRequestError);
    expect(decodeMap(encodeBody({ deep: nested(MAX_DEPTH - 1) }))).toHaveProperty('deep');
  });

  it('refuses a JSON body nested deeper than 64 levels, without recursing', () => {
    const json = (depth: number) => new TextEncoder().encode(`{"a":${'['.repeat(depth - 1)}1${']'.repeat(depth - 1)}}`);
    expect(() => decodeMap(json(MAX_DEPTH), 'json')).not.toThrow();
    expect(() => decodeMap(json(MAX_DEPTH + 1), 'json')).toThrow(/nests deeper than 64 levels/);
    expect(() => decodeMap(json(200_000), 'json')).toThrow(/nests deeper than 64 levels/);
  });

  it('answers for input far deeper than the stack without descending into it', () => {
    expect(nestedDeeperThan(nested(200_000), MAX_DEPTH)).toBe(true);
  });

  it('counts bytes as a leaf and looks at every branch', () => {
    expect(nestedDeeperThan({ a: new Uint8Array(10) }, 2)).toBe(false);
    expect(nestedDeeperThan({ a: 1, b: [1, 2, {}], c: { d: [{ e: [] }] } }, 4)).toBe(true);
    expect(nestedDeeperThan({ a: 1, b: [1, 2, {}], c: { d: [{ e: 1 }] } }, 4)).toBe(false);
  });
});
