import { describe, expect, it } from 'vitest';
import {
  decodeMap,
  decodeReply,
  encodeBody,
  jsonTextDeeperThan,
  MAX_DEPTH,
  nestedDeeperThan,
  REPLY_SHAPE,
} from '../../src/bus/codec.js';
import { BadRequestError, ReplyShapeError } from '../../src/bus/errors.js';

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

describe('the nesting bound on JSON text', () => {
  const text = (levels: number) => `${'{"a":['.repeat(levels / 2)}1${']}'.repeat(levels / 2)}`;

  it('takes text nested exactly as deep as allowed and refuses one level more', () => {
    expect(jsonTextDeeperThan(text(MAX_DEPTH), MAX_DEPTH)).toBe(false);
    expect(jsonTextDeeperThan(`[${text(MAX_DEPTH)}]`, MAX_DEPTH)).toBe(true);
  });

  it('judges text far deeper than the stack in one pass', () => {
    expect(jsonTextDeeperThan(text(1_000_000), MAX_DEPTH)).toBe(true);
  });

  it('skips brackets inside strings, escaped quotes included', () => {
    expect(jsonTextDeeperThan(JSON.stringify({ s: `\\"${'['.repeat(100)}` }), 2)).toBe(false);
  });
});

describe('reading a reply (PROTOCOL section 2)', () => {
  const utf8 = (s: string) => new TextEncoder().encode(s);

  it('reads a body by its Content-Type', () => {
    expect(decodeReply(utf8('{"ok":true}'), 'application/json; charset=utf-8')).toEqual({ ok: true });
    expect(decodeReply(utf8('hello'), 'text/plain')).toBe('hello');
    expect(decodeReply(encodeBody({ ok: 1 }), 'application/msgpack')).toEqual({ ok: 1 });
  });

  it('reads a body without one as MessagePack, failing that as JSON', () => {
    expect(decodeReply(encodeBody({ ok: true }))).toEqual({ ok: true });
    expect(decodeReply(utf8('{"ok":true}'))).toEqual({ ok: true });
    expect(decodeReply(utf8(' [1,2]'))).toEqual([1, 2]);
  });

  it('refuses a body that is neither, saying so', () => {
    expect(() => decodeReply(Uint8Array.of(0xc1, 0x7b))).toThrow(/neither MessagePack nor JSON/);
    expect(() => decodeReply(utf8('{"ok":'), 'application/json')).toThrow(BadRequestError);
  });

  // A reply comes from a target that may be hostile: its shape is judged from its bytes, as a
  // request's is, within REPLY_SHAPE, and the first excess is refused before anything decodes it.
  it('reads a reply as deep, as wide and as many values as REPLY_SHAPE allows, and refuses one more', () => {
    const { maxDepth, maxArrayItems, maxMapEntries, maxValues } = REPLY_SHAPE;
    const refusal = (body: Uint8Array, contentType?: string) => {
      try {
        decodeReply(body, contentType);
      } catch (err) {
        expect(err).toBeInstanceOf(ReplyShapeError);
        return (err as ReplyShapeError).details?.violations?.[0]?.keyword;
      }
      return undefined;
    };
    const arrays = (levels: number) => utf8(`${'['.repeat(levels)}${']'.repeat(levels)}`);
    expect(refusal(arrays(maxDepth), 'application/json')).toBeUndefined();
    expect(refusal(arrays(maxDepth + 1), 'application/json')).toBe('maxDepth');
    expect(refusal(arrays(maxDepth + 1))).toBe('maxDepth');
    const deep = new Uint8Array(maxDepth + 2).fill(0x91);
    deep[maxDepth + 1] = 0xc0;
    expect(refusal(deep.subarray(1))).toBeUndefined();
    expect(refusal(deep)).toBe('maxDepth');
    expect(refusal(encodeBody(Array.from({ length: maxArrayItems }, () => 0)))).toBe('maxValues');
    expect(refusal(encodeBody(Array.from({ length: maxArrayItems + 1 }, () => 0)))).toBe('maxEntries');
    const wide = (n: number) => encodeBody(Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i])));
    expect(refusal(wide(maxMapEntries))).toBeUndefined();
    expect(refusal(wide(maxMapEntries + 1))).toBe('maxEntries');
    // Values past the bound in arrays each within theirs: 4 of 65,536 empty maps and their top.
    const quarter = encodeBody(Array.from({ length: maxValues / 4 }, () => ({})));
    expect(refusal(quarter)).toBeUndefined();
    expect(refusal(encodeBody([[], [], [], []].map(() => Array.from({ length: maxValues / 4 }, () => ({})))))).toBe(
      'maxValues',
    );
  });
});

// A JSON reply holding bytes (a `$call` result's `structured`, asked in JSON) was an object of
// one key per byte, ten times their size: the cap of a result measures them as base64.
describe('bytes in a JSON body', () => {
  it('are their base64 text, at any depth, a Buffer too', () => {
    const body = { a: [Uint8Array.of(104, 105)], b: Buffer.from('hi'), s: 'x' };
    expect(new TextDecoder().decode(encodeBody(body, 'json'))).toBe('{"a":["aGk="],"b":"aGk=","s":"x"}');
    expect(new TextDecoder().decode(encodeBody({ s: 'x' }, 'json'))).toBe('{"s":"x"}');
  });
});
