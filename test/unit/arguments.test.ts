import { describe, expect, it } from 'vitest';
import type { CallEvent } from '../../src/audit/events.js';
import { ArgumentValidators, acceptsNull, readArguments, withoutStrictNulls } from '../../src/dispatcher/arguments.js';
import { CallFailure } from '../../src/dispatcher/results.js';
import { builtinContexts } from '../../src/registry/builtins.js';
import { resolveToolContext } from '../../src/registry/resolver.js';
import { StaticStore, storedBuiltin } from '../../src/registry/store.js';
import type { JsonSchemaObject, ToolContextSpec } from '../../src/registry/types.js';

const validators = new ArgumentValidators();
const open: JsonSchemaObject = { type: 'object' };

/** The refusal `readArguments` throws, or undefined when it accepts. */
function refusal(args: string | Record<string, unknown>, schema = open, event?: CallEvent): CallFailure | undefined {
  try {
    readArguments({ id: '1', name: 'tool', arguments: args }, schema, validators, event);
    return undefined;
  } catch (err) {
    if (err instanceof CallFailure) return err;
    throw err;
  }
}

const emptyEvent = (): CallEvent => ({ callId: '1', name: 'tool', outcome: 'ok', durationMs: 0, at: '' });

describe('readArguments, before anything parses or walks them', () => {
  const deepText = (levels: number) => `{"spec":${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}}`;

  it('takes JSON text nested 64 levels and refuses 65 as bad_request', () => {
    expect(refusal(deepText(63))).toBeUndefined();
    expect(refusal(deepText(64))).toMatchObject({
      code: 'bad_request',
      message: expect.stringContaining('nest deeper than 64 levels'),
    });
  });

  it('refuses 100,000 levels of text with a digest of the text, not a stack overflow', () => {
    const event = emptyEvent();
    const text = deepText(100_000);
    expect(refusal(text, open, event)?.code).toBe('bad_request');
    expect(event.argumentsDigest).toMatch(/^[0-9a-f]{64}$/);
    expect(event.argumentsBytes).toBe(text.length);
  });

  it('counts brackets inside strings as text, not nesting', () => {
    expect(refusal(JSON.stringify({ q: '{['.repeat(500), e: '\\"{' }))).toBeUndefined();
  });

  it('refuses an object nested past the bound, as a library caller might pass one', () => {
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 10_000; i++) deep = { a: deep };
    expect(refusal(deep)?.message).toContain('nest deeper than 64 levels');
  });

  it('refuses a __proto__ key anywhere, saying the arguments were refused and why', () => {
    const r = refusal('{"target":"app.x","op":"$do","args":{"list":[{"__proto__":{"admin":true}}]}}');
    expect(r?.code).toBe('bad_request');
    expect(r?.message).toMatch(
      /The arguments of "tool" were refused: they hold a key "__proto__" \(argument "args.list\[0\].__proto__"\)/,
    );
    expect(refusal('{"q":"__proto__"}')).toBeUndefined();
  });

  it('refuses a __proto__ key spelled with JSON escapes in argument text', () => {
    const r = refusal('{"\\u005f_proto__":{"isAdmin":true},"a":1}');
    expect(r?.message).toMatch(/they hold a key "__proto__"/);
    expect(refusal('{"q":"caf\\u00e9"}')).toBeUndefined();
  });

  it('records a digest of what it could not send, and none of a value JSON cannot hold', () => {
    const event = emptyEvent();
    expect(refusal({ n: 10n } as never, open, event)).toBeUndefined();
    expect(event.argumentsDigest).toBeUndefined();
  });
});

describe('nulls from OpenAI strict mode', () => {
  const schema: JsonSchemaObject = {
    type: 'object',
    additionalProperties: false,
    required: ['title'],
    properties: {
      title: { type: 'string' },
      tags: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['name'],
          properties: { name: { type: 'string' }, weight: { type: 'number' } },
        },
      },
      options: {
        type: 'object',
        additionalProperties: false,
        properties: { dryRun: { type: 'boolean' }, mode: { enum: ['fast', 'slow'] } },
      },
      note: { type: ['string', 'null'] },
      ref: { $ref: '#/$defs/id' },
    },
    $defs: { id: { type: 'string' } },
  };

  it('counts a null as absent where strict rendering made an optional property nullable, at any depth', () => {
    const sent = {
      title: 't',
      tags: [{ name: 'a', weight: null }],
      options: { dryRun: null, mode: null },
      note: null,
      ref: null,
    };
    expect(withoutStrictNulls(schema, sent)).toEqual({ title: 't', tags: [{ name: 'a' }], options: {}, note: null });
    expect(sent.options.mode).toBeNull();
  });

  it('gives back the same object when there is nothing to drop', () => {
    const sent = { title: 't', tags: [{ name: 'a' }] };
    expect(withoutStrictNulls(schema, sent)).toBe(sent);
  });

  it('still refuses a null the tool’s own schema forbids on a required property', () => {
    expect(refusal({ title: null }, schema)?.message).toContain('argument "title" must be string');
  });

  it('knows which schemas take null', () => {
    expect(
      [
        { type: 'null' },
        { type: ['integer', 'null'] },
        { enum: [1, null] },
        { anyOf: [{ type: 'string' }, { type: 'null' }] },
        {},
        true,
      ].map(acceptsNull),
    ).toEqual([true, true, true, true, true, true]);
    expect([{ type: 'string' }, { enum: ['a'] }, { const: 1 }, { $ref: '#/x' }, false].map(acceptsNull)).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
  });

  const registered: ToolContextSpec = {
    key: 'strict-test',
    title: 'Strict test',
    description: 'a registered tool with optional properties at every depth',
    matrixTools: [{ name: 'plan', description: 'plans', inputSchema: schema, target: 'app.plans', op: '$plan' }],
    permissions: { approval: 'never' },
  };

  it('accepts every built-in tool and a registered one called with the nulls a strict model sends', () => {
    const store = new StaticStore(
      [...builtinContexts.map(storedBuiltin), { spec: registered, source: 'registered', revision: 1 }],
      1,
    );
    const keys = [...builtinContexts.map((c) => c.key), registered.key];
    const resolved = resolveToolContext({ profile: 'p', toolContextRefs: keys, format: 'openai', strict: true }, store);
    const rendered = new Map(
      (resolved.providerTools ?? []).map((t) => {
        const f = (t as { function: { name: string; parameters: JsonSchemaObject } }).function;
        return [f.name, f.parameters];
      }),
    );
    expect(resolved.matrixTools.map((t) => t.name).sort()).toEqual(
      ['matrix_introspect', 'session_state_read', 'matrix_invoke', 'trace_query', 'package_validate', 'plan'].sort(),
    );
    for (const tool of resolved.matrixTools) {
      const parameters = rendered.get(tool.name) as JsonSchemaObject;
      for (const fill of [false, true]) {
        const sent = strictModelArguments(parameters, fill);
        expect({ tool: tool.name, sent, refused: refusal(JSON.stringify(sent), tool.inputSchema)?.message }).toEqual({
          tool: tool.name,
          sent,
          refused: undefined,
        });
      }
    }
    expect(strictModelArguments(rendered.get('trace_query') as JsonSchemaObject, false)).toEqual({
      traceId: null,
      tool: null,
      session: null,
      principal: null,
      outcome: null,
      since: null,
      until: null,
      limit: null,
      cursor: null,
    });
  });
});

/** Values a model picks for required strings whose pattern `x` would miss. */
const samples: Record<string, unknown> = { target: 'app.notes', op: '$update' };

/**
 * Arguments as a strict model sends them for a rendered schema: every required property, null
 * wherever the rendering allows null (or, with `fill`, a nullable object or array filled in, its
 * own nullable properties null in turn).
 */
function strictModelArguments(schema: unknown, fill: boolean, name = ''): unknown {
  const s = schema as Record<string, unknown>;
  const nonNull = Array.isArray(s.anyOf) ? (s.anyOf as Record<string, unknown>[]).find((b) => b.type !== 'null') : s;
  const type = Array.isArray(nonNull?.type) ? (nonNull.type as string[]).find((t) => t !== 'null') : nonNull?.type;
  const container = type === 'object' || type === 'array';
  if (acceptsNull(s) && !(fill && container)) return null;
  if (name in samples) return samples[name];
  if (Array.isArray(nonNull?.enum)) return nonNull.enum.find((v) => v !== null);
  switch (type) {
    case 'object': {
      const required = (nonNull?.required as string[] | undefined) ?? [];
      const properties = (nonNull?.properties ?? {}) as Record<string, unknown>;
      return Object.fromEntries(required.map((k) => [k, strictModelArguments(properties[k], fill, k)]));
    }
    case 'array':
      return nonNull?.items === undefined ? [] : [strictModelArguments(nonNull.items, fill)];
    case 'integer':
    case 'number':
      return (nonNull?.minimum as number | undefined) ?? 1;
    case 'boolean':
      return true;
    default:
      return 'x';
  }
}
