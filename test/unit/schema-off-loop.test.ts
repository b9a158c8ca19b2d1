/**
 * A large tool schema is compiled on the compiler thread (`checkSoon`) and checks exactly as
 * one compiled in-process does: the same violations, worded the same (the known fields of an
 * object come from its schema), every one for small values and the first for large ones. A
 * schema that does not compile is refused, and refused from memory after that; one whose
 * compile the thread never finished is compiled again.
 */
import { describe, expect, it } from 'vitest';
import { Dialect, OFF_LOOP_SCHEMA_CHARS, SchemaCompiler, stopCompilerThread } from '../../src/bus/schema-compiler.js';
import { ThreadStopped } from '../../src/worker-thread.js';

/** A closed object schema of `n` string fields, and a `limit` integer, padded past the off-loop bound. */
function largeSchema(salt: string): Record<string, unknown> {
  const properties: Record<string, unknown> = { limit: { type: 'integer', maximum: 10 } };
  for (let i = 0; JSON.stringify(properties).length < OFF_LOOP_SCHEMA_CHARS; i++)
    properties[`${salt}_${i}`] = { type: 'string', maxLength: 8 };
  return { type: 'object', additionalProperties: false, required: [`${salt}_0`], properties };
}

describe('a large tool schema, compiled off the event loop', () => {
  it('checks as the same schema compiled in-process does', async () => {
    const offLoop = new SchemaCompiler(Dialect.Tools);
    const inProcess = new SchemaCompiler(Dialect.Tools);
    const schema = largeSchema('f');
    const soon = offLoop.checkSoon(schema);
    expect(soon).toBeInstanceOf(Promise);
    // Every caller of the same schema waits for the one compile.
    expect(offLoop.checkSoon(structuredClone(schema))).toBeInstanceOf(Promise);
    const check = await soon;
    expect(offLoop.checkSoon(schema)).toBe(check);
    expect(offLoop.checkSoon(structuredClone(schema))).toBe(check);
    const reference = inProcess.check(schema);
    const values = [
      { f_0: 'ok' },
      { f_0: 'much too long', limit: 50, colour: 'red' },
      {},
      { f_0: 1, f_3: [], limit: 'x' },
    ];
    for (const value of values) {
      expect(check(value)).toEqual(reference(value));
      expect(check(value, { bytes: 1 << 20 })).toEqual(reference(value, { bytes: 1 << 20 }));
    }
    expect(check(values[1])?.length).toBe(3);
    expect(check(values[1], { bytes: 1 << 20 })).toHaveLength(1);
    expect(check(values[1])?.find((v) => v.path === '/colour')?.message).toContain('known fields: limit, f_0');
  });

  it('refuses a schema that does not compile, from memory the second time', async () => {
    const compiler = new SchemaCompiler(Dialect.Tools);
    const broken = { ...largeSchema('b'), $ref: 'https://nowhere.invalid/schema.json' };
    const soon = compiler.checkSoon(broken);
    await expect(soon).rejects.toThrow(/resolve reference/);
    expect(() => compiler.checkSoon(broken)).toThrow(/resolve reference/);
  });

  it('compiles a schema again after the thread stopped under it: that is no verdict on the schema', async () => {
    const compiler = new SchemaCompiler(Dialect.Tools);
    const schema = largeSchema('s');
    const soon = compiler.checkSoon(schema);
    await stopCompilerThread();
    await expect(soon).rejects.toBeInstanceOf(ThreadStopped);
    const again = compiler.checkSoon(schema);
    expect(again).toBeInstanceOf(Promise);
    expect((await again)({ s_0: 'ok' })).toBeUndefined();
  });

  it('compiles a small schema in-process, at once', () => {
    const compiler = new SchemaCompiler(Dialect.Tools);
    const check = compiler.checkSoon({ type: 'object', properties: { q: { type: 'string' } } });
    expect(typeof check).toBe('function');
  });
});
