import { describe, expect, it } from 'vitest';
import { MAX_DEPTH } from '../../src/bus/codec.js';
import { TOOL_SCHEMA_CACHE } from '../../src/bus/schema-compiler.js';
import { ArgumentValidators, argumentName, argumentsMessage, parseArguments } from '../../src/dispatcher/arguments.js';
import {
  capContent,
  isFailedToolReply,
  shapeReply,
  structuredObject,
  structuredTravels,
  summarize,
} from '../../src/dispatcher/shape.js';

const opts = { cap: 1_000, summaryBudget: 300 };

describe('shaping a reply by resultMode', () => {
  it('json: the JSON text as content and the reply as structured', () => {
    expect(shapeReply({ a: 1, b: [true] }, 'json', opts)).toEqual({
      content: '{"a":1,"b":[true]}',
      structured: { a: 1, b: [true] },
    });
  });

  it('json: bytes show as their length and big integers as their digits, at any depth, in objects and arrays', () => {
    const reply = { a: [1, { b: new Uint8Array(3) }], n: 12345678901234567890n, s: 'x' };
    expect(shapeReply(reply, 'json', opts).content).toBe(
      '{"a":[1,{"b":"<3 bytes>"}],"n":"12345678901234567890","s":"x"}',
    );
    expect(shapeReply([new Uint8Array([104, 105])], 'text', opts).content).toBe('["<2 bytes>"]');
    // A reply decoded from a Buffer holds Buffers, whose toJSON runs before a replacer.
    expect(shapeReply({ b: Buffer.from('hi') }, 'json', opts).content).toBe('{"b":"<2 bytes>"}');
    expect(shapeReply(undefined, 'json', opts).content).toBe('null');
  });

  it('text: the reply if a string, else its text field, else JSON', () => {
    expect(shapeReply('plain', 'text', opts).content).toBe('plain');
    expect(shapeReply({ text: 'from field', other: 1 }, 'text', opts).content).toBe('from field');
    expect(shapeReply({ other: 1 }, 'text', opts).content).toBe('{"other":1}');
  });

  it('caps content and says how much it cut, dropping structured', () => {
    const shaped = shapeReply({ blob: 'x'.repeat(5_000) }, 'json', opts);
    expect(shaped.content.length).toBeLessThanOrEqual(1_000);
    expect(shaped.truncated).toEqual({ shown: expect.any(Number), total: 5_011 });
    expect(shaped.content).toMatch(new RegExp(`truncated: showing ${shaped.truncated?.shown} of 5011 characters]$`));
    expect(shaped.structured).toBeUndefined();
  });

  it('json: keeps structured only while it nests shallow enough to travel inside a result', () => {
    const arrays = (levels: number): unknown => (levels <= 1 ? [] : [arrays(levels - 1)]);
    expect(shapeReply(arrays(MAX_DEPTH - 1), 'json', opts).structured).toEqual(arrays(MAX_DEPTH - 1));
    const tooDeep = shapeReply(arrays(MAX_DEPTH), 'json', opts);
    expect(tooDeep.structured).toBeUndefined();
    expect(tooDeep.content).toBe(JSON.stringify(arrays(MAX_DEPTH)));
    expect([
      structuredTravels('text', false, 1_000),
      structuredTravels(null, false, 1_000),
      structuredTravels({ a: 1 }, true, 1_000),
    ]).toEqual([true, true, false]);
  });

  it('gives a structured reply as an object only when it is one (MCP structuredContent)', () => {
    expect([{ structured: { a: 1 } }, { structured: [1] }, { structured: 'x' }, {}].map(structuredObject)).toEqual([
      { a: 1 },
      undefined,
      undefined,
      undefined,
    ]);
  });

  it('leaves content under the cap alone', () => {
    expect(capContent('short', 10)).toEqual({ content: 'short' });
  });
});

/**
 * The cap counts bytes as encoded, not characters (issue 41's attack: a 900 KB bytes reply had a
 * 24-character text and travelled whole as structured; 65,536 control characters were within a
 * cap of characters and took 393,907 bytes stored). Content counts as its JSON string in UTF-8,
 * structured as the larger of its MessagePack and JSON, both within the cap together.
 */
describe('the cap of a result, in bytes', () => {
  const stored = (text: string) => Buffer.byteLength(JSON.stringify(text)) - 2;

  it('json: leaves out a structured reply whose bytes pass the cap, and says so in the content', () => {
    const shaped = shapeReply({ pad: new Uint8Array(900_000).fill(0x61) }, 'json', opts);
    expect(shaped.structured).toBeUndefined();
    expect(shaped.content).toMatch(/^\{"pad":"<900000 bytes>"\}\n…\[the reply itself is not attached \(structured\)/);
    expect(shaped.content).toContain('shown above only as <n bytes>');
    expect(stored(shaped.content)).toBeLessThanOrEqual(opts.cap);
  });

  it('json: structured travels while text and structured together fit the cap, not past it', () => {
    const fits = { s: 'x'.repeat(400) }; // 410 bytes of text, ~405 of MessagePack
    expect(shapeReply(fits, 'json', opts).structured).toEqual(fits);
    const over = { s: 'x'.repeat(600) }; // each alone fits 1,000, together not
    const shaped = shapeReply(over, 'json', opts);
    expect(shaped.structured).toBeUndefined();
    expect(shaped.content.startsWith(JSON.stringify(over))).toBe(true);
    expect(stored(shaped.content)).toBeLessThanOrEqual(opts.cap);
    // Small bytes still travel, measured as base64 in JSON.
    const small = { b: new Uint8Array(100) };
    expect(shapeReply(small, 'json', opts).structured).toEqual(small);
  });

  it('cuts text by its bytes as stored: control characters six each, others by UTF-8, no pair split', () => {
    const controls = shapeReply('\u0001'.repeat(1_000), 'text', opts);
    expect(stored(controls.content)).toBeLessThanOrEqual(opts.cap);
    expect(controls.truncated?.total).toBe(1_000);
    expect(controls.truncated?.shown).toBeGreaterThan(140);
    const emoji = capContent('😀'.repeat(500), 1_000); // 4 bytes a pair
    expect(stored(emoji.content)).toBeLessThanOrEqual(1_000);
    expect((emoji.truncated?.shown ?? 1) % 2).toBe(0);
    expect(Buffer.from(emoji.content).toString()).toBe(emoji.content); // no lone surrogate
    expect(capContent('é'.repeat(500), 1_000)).toEqual({ content: 'é'.repeat(500) });
    expect(capContent('é'.repeat(501), 1_000).truncated?.total).toBe(501);
  });
});

describe('summarize', () => {
  const big = {
    items: Array.from({ length: 5_000 }, (_, i) => ({
      id: i,
      name: `item-${i}`,
      tags: ['a', 'b', 'c'],
      body: 'lorem ipsum '.repeat(50),
      nested: { deep: { deeper: { deepest: i } } },
    })),
    total: 5_000,
    note: 'n'.repeat(10_000),
  };

  it('stays within its budget for a large nested reply', () => {
    for (const budget of [100, 500, 2_000]) expect(summarize(big, budget).length).toBeLessThanOrEqual(budget);
  });

  it('is the same every time', () => {
    expect(summarize(big, 800)).toBe(summarize(structuredClone(big), 800));
  });

  it('says what it left out', () => {
    const text = summarize(big, 2_000);
    expect(text).toMatch(/more items/);
    expect(text).toMatch(/chars\)/);
  });

  it('shows a small reply whole', () => {
    expect(summarize({ ok: true, count: 3, names: ['a', 'b'] })).toBe('{ok: true, count: 3, names: ["a", "b"]}');
  });

  it('bounds its work on a reply of 300,000 keys: it reads a few of their values, not all', () => {
    let reads = 0;
    // Counted reads, not wall-clock time, so the bound holds on a loaded machine too.
    const probe = {
      get v() {
        reads++;
        return 1;
      },
    };
    const wide = Object.fromEntries(Array.from({ length: 300_000 }, (_, i) => [`k${i}`, probe]));
    expect(summarize(wide, 200).length).toBeLessThanOrEqual(200);
    expect(reads).toBeGreaterThan(0);
    expect(reads).toBeLessThan(1_000);
  });
});

describe('tool arguments', () => {
  it('reads objects, JSON text and nothing', () => {
    expect(parseArguments({ a: 1 })).toEqual({ ok: true, value: { a: 1 } });
    expect(parseArguments('{"a":1}')).toEqual({ ok: true, value: { a: 1 } });
    expect(parseArguments(undefined)).toEqual({ ok: true, value: {} });
    expect(parseArguments('')).toEqual({ ok: true, value: {} });
  });

  it('refuses text that is not JSON, and JSON that is not an object', () => {
    expect(parseArguments('{a:')).toMatchObject({ ok: false, reason: expect.stringContaining('not valid JSON') });
    expect(parseArguments('[1]')).toMatchObject({ ok: false, reason: expect.stringContaining('JSON object') });
  });

  it('names arguments the way a model writes them', () => {
    expect(argumentName('/limit')).toBe('argument "limit"');
    expect(argumentName('/items/0/name')).toBe('argument "items[0].name"');
    expect(argumentName('')).toBe('the arguments');
  });

  it('compiles each schema once and explains every violation', () => {
    const validators = new ArgumentValidators();
    const schema = {
      type: 'object' as const,
      additionalProperties: false,
      required: ['q'],
      properties: { q: { type: 'string' }, limit: { type: 'integer', maximum: 10 } },
    };
    const check = validators.check(schema);
    expect(validators.check(schema)).toBe(check);
    expect(validators.check(structuredClone(schema))).toBe(check);
    const violations = check({ limit: 50, colour: 'red' }) ?? [];
    const message = argumentsMessage('search', violations);
    expect(message).toContain('argument "q" is required');
    expect(message).toContain('argument "limit" must be <= 10');
    expect(message).toContain('argument "colour" is not a known field (known fields: q, limit)');
    expect(message).toMatch(/Fix the arguments and call "search" again\.$/);
  });

  it('keeps compiled schemas within a bound of schema text, starting afresh past it', () => {
    const validators = new ArgumentValidators({ ...TOOL_SCHEMA_CACHE, maxBytes: 10_000 });
    const schema = (i: number) => ({
      type: 'object' as const,
      description: `${i}`.padEnd(1_000, '.'),
      properties: { [`p${i}`]: { type: 'string' } },
    });
    for (let i = 0; i < 100; i++) {
      expect(validators.check(schema(i))({ [`p${i}`]: 1 })).toHaveLength(1);
      expect(validators.size.text).toBeLessThanOrEqual(10_000);
    }
    expect(validators.size.schemas).toBeLessThan(10);
    expect(validators.check(schema(99))({ p99: 'ok' })).toBeUndefined();
  });
});

describe('a failed MCP tool reply', () => {
  it("is a failed result only when it is MCP's CallToolResult with isError true", () => {
    expect(isFailedToolReply({ content: [{ type: 'text', text: 'no' }], isError: true })).toBe(true);
    expect(isFailedToolReply({ content: [], isError: false })).toBe(false);
    expect(isFailedToolReply({ isError: true })).toBe(false);
    expect(isFailedToolReply({ content: 'text', isError: true })).toBe(false);
    expect(isFailedToolReply(null)).toBe(false);
    expect(isFailedToolReply('isError')).toBe(false);
  });
});
