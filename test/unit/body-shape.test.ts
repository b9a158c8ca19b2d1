import { describe, expect, it } from 'vitest';
import {
  closedTopLevel,
  decodeMap,
  Encoding,
  encodeBody,
  jsonShapeViolation,
  msgPackShapeViolation,
  REQUEST_SHAPE,
  type ShapeBounds,
} from '../../src/bus/codec.js';
import { contracts, SchemaId } from '../../src/bus/contracts.js';
import { BadRequestError } from '../../src/bus/errors.js';
import { describeViolations, violationDetails } from '../../src/bus/schema-compiler.js';

const small: ShapeBounds = { maxDepth: 4, maxMapEntries: 3, maxArrayItems: 5, maxValues: 30 };
const known = new Set(['session', 'call']);
const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

/** The same verdict from the MessagePack and the JSON of a value. */
function both(value: unknown, keys?: ReadonlySet<string>) {
  const fromMsgPack = msgPackShapeViolation(encodeBody(value), small, keys);
  const fromJson = jsonShapeViolation(json(value), small, keys);
  expect(fromJson?.keyword).toBe(fromMsgPack?.keyword);
  return fromMsgPack;
}

describe('the shape of a body, judged from its bytes', () => {
  it('passes bodies within every bound, in both encodings', () => {
    expect(both({ session: { profile: 'p' }, call: { id: 'a', name: 'b' } }, known)).toBeUndefined();
    expect(both({ a: [1, 2, 3, 4, 5], b: 'x"]}[{,', c: null })).toBeUndefined();
    expect(both({ a: { b: { c: [1] } } })).toBeUndefined();
  });

  it('refuses nesting past the depth bound', () => {
    expect(both({ a: { b: { c: [[1]] } } })).toMatchObject({ keyword: 'maxDepth' });
  });

  it('refuses a map or an array past its entry bound', () => {
    expect(both({ a: 1, b: 2, c: 3, d: 4 })).toMatchObject({ keyword: 'maxEntries' });
    expect(both({ a: [1, 2, 3, 4, 5, 6] })).toMatchObject({ keyword: 'maxEntries' });
  });

  it('refuses more values in all than the bound', () => {
    expect(both({ a: [1, 2, 3, 4, 5], b: [1, 2, 3, 4, 5] })).toBeUndefined();
    const many = {
      a: [
        [1, 2, 3, 4, 5],
        [1, 2, 3, 4, 5],
        [1, 2, 3, 4, 5],
        [1, 2, 3, 4, 5],
        [1, 2, 3, 4, 5],
      ],
    };
    expect(both(many)).toMatchObject({ keyword: 'maxValues' });
  });

  it('refuses the first top-level key the schema does not know, nested ones left to the schema', () => {
    expect(both({ session: {}, oops: 1, call: {} }, known)).toMatchObject({ keyword: 'unknownField', path: '/oops' });
    expect(both({ session: { oops: 1 }, call: {} }, known)).toBeUndefined();
    expect(jsonShapeViolation('{"ses\\u0073ion": 1}', small, known)).toBeUndefined();
    expect(jsonShapeViolation('{"call": "session", "x": "call"}', small, known)).toMatchObject({ path: '/x' });
  });

  it('judges a body far deeper than the stack in a few steps', () => {
    /** Nested one-element arrays `levels` deep, in MessagePack and in JSON. */
    const nested = (levels: number) => {
      const packed = new Uint8Array(levels + 1).fill(0x91);
      packed[levels] = 0xc0;
      return { packed, json: '['.repeat(levels / 2) };
    };
    /** The fastest of 5 judgings of both forms, in ms: the least the machine's other work added. */
    const judged = (body: { packed: Uint8Array; json: string }) => {
      let fastest = Number.POSITIVE_INFINITY;
      for (let i = 0; i < 5; i++) {
        const started = performance.now();
        expect(msgPackShapeViolation(body.packed, REQUEST_SHAPE)).toMatchObject({ keyword: 'maxDepth' });
        expect(jsonShapeViolation(body.json, REQUEST_SHAPE)).toMatchObject({ keyword: 'maxDepth' });
        fastest = Math.min(fastest, performance.now() - started);
      }
      return fastest;
    };
    // The control: a body 1,000 times shallower, also past the depth limit. Read to the limit
    // and no further, both take the same few steps; read whole, the deep one takes ~1,000 times
    // longer. The margin (10×) is wide enough for a busy machine, far below what reading costs.
    const control = judged(nested(900));
    const deep = judged(nested(900_000));
    expect(deep).toBeLessThan(10 * Math.max(control, 0.05));
  });

  it('reads a map of 60,000 entries no further than its header', () => {
    const keys: Record<string, number> = {};
    for (let i = 0; i < 60_000; i++) keys[`u${i}`] = 1;
    const body = encodeBody(keys);
    expect(msgPackShapeViolation(body, REQUEST_SHAPE)).toMatchObject({ keyword: 'maxEntries' });
    expect(msgPackShapeViolation(body, REQUEST_SHAPE, known)).toMatchObject({ keyword: 'maxEntries' });
  });

  it('leaves malformed bytes to the decoder, which says so as bad_request', () => {
    expect(msgPackShapeViolation(new Uint8Array([0xdf, 0, 0]), REQUEST_SHAPE)).toBeUndefined();
    expect(() => decodeMap(new Uint8Array([0xc1]))).toThrow(BadRequestError);
    expect(() => decodeMap(json({ session: {}, x: 1 }), Encoding.Json, known)).toThrow(
      /field \/x is not a known field/,
    );
  });

  it('carries nothing from one body to the next, whatever bounds came before', () => {
    // Each check starts afresh: a refused deep or wide body leaves no count behind.
    expect(both({ a: { b: { c: [[1]] } } })).toMatchObject({ keyword: 'maxDepth' });
    expect(both({ a: [1, 2, 3, 4, 5, 6] })).toMatchObject({ keyword: 'maxEntries' });
    expect(both({ a: [1, 2, 3, 4, 5] })).toBeUndefined();
    const deeper: ShapeBounds = { ...REQUEST_SHAPE, maxDepth: 96 };
    expect(msgPackShapeViolation(encodeBody(nest(90)), deeper)).toBeUndefined();
    expect(jsonShapeViolation(JSON.stringify(nest(90)), deeper)).toBeUndefined();
    expect(both({ a: { b: { c: [1] } } })).toBeUndefined();
    // Commas outside any container (malformed text, for the parser to report) count afresh each time.
    for (let i = 0; i < 3; i++) expect(jsonShapeViolation('1,2,3', small)).toBeUndefined();
  });

  it('compares top-level keys outside ASCII and of any length by their text', () => {
    const keys = new Set(['séance', 'k'.repeat(40)]);
    expect(both({ séance: 1, ['k'.repeat(40)]: 2 }, keys)).toBeUndefined();
    expect(both({ seance: 1 }, keys)).toMatchObject({ keyword: 'unknownField', path: '/seance' });
    expect(both({ ['k'.repeat(41)]: 1 }, keys)).toMatchObject({ keyword: 'unknownField' });
  });

  it('knows the top level of a closed schema only', () => {
    expect(closedTopLevel(contracts().schema(SchemaId.CallRequest))).toEqual(new Set(['session', 'call', 'task']));
    expect(closedTopLevel({ type: 'object', properties: { a: {} } })).toBeUndefined();
  });
});

describe('a list of violations', () => {
  const violations = Array.from({ length: 25 }, (_, i) => ({ path: `/f${i}`, message: 'is wrong' }));

  it('is worded as its first three and how many more', () => {
    expect(describeViolations(violations)).toBe('/f0 is wrong; /f1 is wrong; /f2 is wrong (and 22 more)');
    expect(describeViolations([{ path: '', message: 'must be an object' }])).toBe('(body) must be an object');
  });

  it('lists at most ten entries in details and counts the rest', () => {
    expect(violationDetails(violations)).toMatchObject({ moreViolations: 15 });
    expect(violationDetails(violations).violations).toHaveLength(10);
    expect(violationDetails(violations.slice(0, 2))).toEqual({ violations: violations.slice(0, 2) });
  });

  it('stops at the first violation of a large value', () => {
    const check = contracts().check(SchemaId.ListRequest);
    const value = { a: 1, b: 2, c: 3 };
    expect(check(value)?.length).toBe(3);
    expect(check(value, { bytes: 1024 * 1024 })?.length).toBe(1);
  });
});

/** A value `levels` maps deep. */
function nest(levels: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = { a: value };
  return value;
}
