import { encode } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { decideByPolicy, loadPolicy } from '../../src/approvals/policy.js';
import { type CallEvent, decodeCallEvents, eventsIn, traceIdsOfBatch } from '../../src/audit/events.js';
import { TraceBuffer } from '../../src/audit/trace-buffer.js';
import { describeMounts } from '../../src/reference-mounts/agents.js';
import { validateSpecs } from '../../src/reference-mounts/packages.js';
import { resolveToolContext } from '../../src/registry/resolver.js';
import { StaticStore } from '../../src/registry/store.js';
import { toStrictSchema } from '../../src/registry/strict.js';

const event = (i: number, extra: Partial<CallEvent> = {}): CallEvent => ({
  callId: `c${i}`,
  name: i % 2 ? 'odd' : 'even',
  outcome: i % 3 ? 'ok' : 'error',
  durationMs: 1,
  at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
  traceparent: `00-${String(i).padStart(32, '0')}-0000000000000001-01`,
  ...extra,
});

describe('the trace buffer', () => {
  it('keeps the newest events, newest first, and filters them', () => {
    const buffer = new TraceBuffer(5);
    for (let i = 1; i <= 8; i++) buffer.add(event(i));
    expect(buffer.query({}).events.map((e) => e.callId)).toEqual(['c8', 'c7', 'c6', 'c5', 'c4']);
    expect(buffer.query({ tool: 'odd' }).events.map((e) => e.callId)).toEqual(['c7', 'c5']);
    expect(buffer.query({ outcome: 'error' }).events.map((e) => e.callId)).toEqual(['c6']);
    expect(buffer.query({ traceId: '00000000000000000000000000000007' }).events.map((e) => e.callId)).toEqual(['c7']);
    expect(
      buffer.query({ since: '2026-01-01T00:00:06Z', until: '2026-01-01T00:00:08Z' }).events.map((e) => e.callId),
    ).toEqual(['c7', 'c6']);
    expect(buffer.query({ limit: 2 })).toMatchObject({ matched: 5, kept: 5 });
  });

  it('keeps batches as they came and drops the oldest events across batch boundaries', () => {
    const buffer = new TraceBuffer(5);
    expect(buffer.addEncoded(encode([event(1), event(2), event(3)]))).toBe(true);
    expect(buffer.addEncoded(encode(event(4)))).toBe(true);
    expect(buffer.addEncoded(encode([event(5), event(6)]))).toBe(true);
    expect(buffer.size).toBe(5);
    expect(buffer.query({}).events.map((e) => e.callId)).toEqual(['c6', 'c5', 'c4', 'c3', 'c2']);
    buffer.add(event(7));
    expect(buffer.addEncoded(encode(Array.from({ length: 20 }, (_, i) => event(10 + i))))).toBe(true);
    expect(buffer.query({}).events.map((e) => e.callId)).toEqual(['c29', 'c28', 'c27', 'c26', 'c25']);
  });

  it('counts batches of every array size from their header alone', () => {
    for (const n of [0, 15, 16, 65_535, 65_536]) expect(eventsIn(encode(new Array(n).fill(1)))).toBe(n);
    expect(eventsIn(encode({ callId: 'x' }))).toBe(1);
    expect(eventsIn(encode('text'))).toBeUndefined();
    expect(eventsIn(Uint8Array.of(0xdd, 0xff, 0xff, 0xff, 0xff, 0x80))).toBeUndefined(); // claims 4 billion events in 6 bytes
    expect(eventsIn(new Uint8Array())).toBeUndefined();
  });

  it('takes a message for a batch by its header alone, in every reader: the decoder, the index and the buffer', () => {
    const traced = event(1);
    const notBatches = [encode('text'), new Uint8Array(), Uint8Array.of(0x93, 0xc1), Uint8Array.of(0xdc, 0x00)];
    for (const data of notBatches) {
      expect(eventsIn(data)).toBeUndefined();
      expect(decodeCallEvents(data)).toEqual([]);
      expect(traceIdsOfBatch(data).size).toBe(0);
      expect(new TraceBuffer(5).addEncoded(data)).toBe(false);
    }
    for (const data of [encode([traced]), encode(traced)]) {
      expect(eventsIn(data)).toBe(1);
      expect(decodeCallEvents(data)).toEqual([traced]);
      expect([...traceIdsOfBatch(data)]).toEqual(['00000000000000000000000000000001']);
    }
  });

  it('refuses what is not a batch and skips entries of a batch that are not events', () => {
    const buffer = new TraceBuffer(10);
    expect(buffer.addEncoded(encode('not events'))).toBe(false);
    expect(buffer.addEncoded(encode([event(1), 'junk', null, event(2)]))).toBe(true);
    expect(buffer.addEncoded(Uint8Array.of(0x93, 0xc1))).toBe(false); // says 3, has bytes for 1 at most
    expect(buffer.addEncoded(Uint8Array.of(0x93, 0xc1, 0xc1, 0xc1))).toBe(true); // says 3, holds nothing readable
    expect(buffer.query({}).events.map((e) => e.callId)).toEqual(['c2', 'c1']);
    buffer.add(event(3));
    expect(buffer.query({ tool: 'odd' }).events.map((e) => e.callId)).toEqual(['c3', 'c1']);
  });
});

describe('package validation', () => {
  const good = { key: 'ok', title: 'Ok', description: 'fine', permissions: { approval: 'never' } };
  it('refuses to compile a tool schema past 32 KiB of JSON, naming it (720 KB would hold the service ~3 s a call)', () => {
    const properties = Object.fromEntries(
      Array.from({ length: 2_000 }, (_, i) => [`p${i}`, { type: 'string', pattern: '^[a-z]+$' }]),
    );
    const tool = {
      name: 'wide',
      description: 'd',
      inputSchema: { type: 'object', properties },
      target: 'app.x',
      op: '$do',
    };
    const r = validateSpecs([{ ...good, matrixTools: [tool] }]);
    expect(r.valid).toBe(false);
    expect(r.results[0]?.violations).toEqual([
      expect.objectContaining({ path: '/matrixTools/0/inputSchema', keyword: 'maxSize' }),
    ]);
  });

  it('keeps an output schema to the same 32 KiB, naming it', () => {
    const properties = Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [`p${i}`, { type: 'string' }]));
    const tool = {
      name: 'wide',
      description: 'd',
      inputSchema: { type: 'object' },
      outputSchema: { type: 'object', properties },
      target: 'app.x',
      op: '$do',
    };
    expect(validateSpecs([{ ...good, matrixTools: [tool] }]).results[0]?.violations).toEqual([
      expect.objectContaining({ path: '/matrixTools/0/outputSchema', keyword: 'maxSize' }),
    ]);
    const small = { ...tool, outputSchema: { type: 'object', properties: { q: { type: 'string' } } } };
    expect(validateSpecs([{ ...good, matrixTools: [small] }]).valid).toBe(true);
  });

  it('passes a good spec and lists every problem of bad ones', () => {
    const r = validateSpecs([
      good,
      { key: 'Bad!', permissions: {} },
      {
        ...good,
        key: 'reserved',
        matrixTools: [
          { name: 't', description: 'd', inputSchema: { type: 'object' }, target: 'system.tools', op: '$register' },
        ],
      },
      { ...good, key: 'actor-edit' },
      good,
    ]);
    expect(r.valid).toBe(false);
    expect(r.results.map((x) => x.valid)).toEqual([true, false, false, false, false]);
    expect(r.results[1]?.violations.map((v) => v.path)).toEqual(
      expect.arrayContaining(['/key', '/title', '/description', '/permissions/approval']),
    );
    expect(r.results[2]?.violations[0]).toMatchObject({ path: '/matrixTools/0/target', keyword: 'reserved' });
    expect(r.results[3]?.violations[0]).toMatchObject({ keyword: 'builtin' });
    expect(r.results[4]?.violations[0]).toMatchObject({ keyword: 'uniqueKey', message: 'repeats the key of spec 0' });
  });
});

describe('the approval policy', () => {
  it('ships an example policy that is valid', () => {
    expect(loadPolicy(new URL('../../examples/approval-policy.json', import.meta.url).pathname).default).toBe('ask');
  });

  const request = { callId: '1', tool: 'matrix_invoke', target: 'app.notes', op: '$delete', arguments: {} };
  it('lets the first matching rule decide, else the default', () => {
    const policy = {
      rules: [
        { tool: 'matrix_invoke', target: 'app.*', op: '$read', decision: 'allow' as const },
        { target: 'app.>', op: '$delete', decision: 'deny' as const, reason: 'no deletes' },
        { tool: '*', decision: 'ask' as const },
      ],
      default: 'deny' as const,
    };
    expect(decideByPolicy(policy, { ...request, op: '$read' })).toEqual({ decision: 'allow' });
    expect(decideByPolicy(policy, request)).toEqual({ decision: 'deny', reason: 'no deletes' });
    expect(decideByPolicy(policy, { ...request, target: 'other.x' })).toEqual({ decision: 'ask' });
    expect(decideByPolicy({ rules: [{ tool: 'x', decision: 'allow' }] }, request)).toEqual({ decision: 'ask' });
  });
});

describe('describing mounts from discovery', () => {
  it('groups instances by mount and names ops by subject', () => {
    const info = (id: string, mount: string) => ({
      name: mount.replaceAll('.', '-'),
      id,
      version: '1.0.0',
      metadata: { mount },
      endpoints: [{ name: 'list', subject: `${mount}.$list` }],
    });
    expect(describeMounts([info('a', 'system.tools'), info('b', 'system.tools'), info('c', 'app.x')])).toEqual([
      { mount: 'app.x', instances: 1, version: '1.0.0', ops: [{ op: '$list' }] },
      { mount: 'system.tools', instances: 2, version: '1.0.0', ops: [{ op: '$list' }] },
    ]);
  });
});

describe('OpenAI strict mode', () => {
  it('closes objects, requires every property, makes optional ones nullable and reports what it removed', () => {
    const r = toStrictSchema({
      type: 'object',
      required: ['q'],
      properties: { q: { type: 'string', minLength: 1 }, n: { type: 'integer' }, mode: { enum: ['a', 'b'] } },
    });
    expect(r).toEqual({
      strict: true,
      removed: ['/properties/q/minLength'],
      schema: {
        type: 'object',
        required: ['q', 'n', 'mode'],
        additionalProperties: false,
        properties: {
          q: { type: 'string' },
          n: { type: ['integer', 'null'] },
          mode: { anyOf: [{ enum: ['a', 'b'] }, { type: 'null' }] },
        },
      },
    });
  });

  it('leaves a tool with a free-form object non-strict and says why', () => {
    const r = resolveToolContext({ profile: 'edit', format: 'openai', strict: true }, new StaticStore());
    expect(r.providerTools?.[0]).toMatchObject({ function: { name: 'matrix_invoke', strict: false } });
    expect(r.diagnostics).toContainEqual(
      expect.objectContaining({
        code: 'strict_unavailable',
        tool: 'matrix_invoke',
        message: expect.stringContaining('/properties/args is a free-form object'),
      }),
    );
    const readonly = resolveToolContext({ profile: 'default', format: 'openai', strict: true }, new StaticStore());
    expect(readonly.providerTools?.every((t) => 'function' in t && t.function.strict)).toBe(true);
  });
});

describe('checking that tool schemas compile', () => {
  it('refuses a $ref that leads nowhere, which the meta-schema cannot see', async () => {
    const { specViolations } = await import('../../src/registry/validate.js');
    const spec = {
      key: 'refs',
      title: 'R',
      description: 'd',
      permissions: { approval: 'never' },
      matrixTools: [
        {
          name: 't',
          description: 'd',
          inputSchema: { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } },
          target: 'app.x',
          op: '$y',
        },
      ],
    };
    expect(specViolations(spec)).toEqual([
      expect.objectContaining({
        path: '/matrixTools/0/inputSchema',
        keyword: 'compile',
        message: expect.stringContaining('missing'),
      }),
    ]);
  });

  it('accepts a draft-07 schema that says so', async () => {
    const { specViolations } = await import('../../src/registry/validate.js');
    const spec = {
      key: 'd7',
      title: 'D',
      description: 'd',
      permissions: { approval: 'never' },
      matrixTools: [
        {
          name: 't',
          description: 'd',
          inputSchema: {
            $schema: 'http://json-schema.org/draft-07/schema#',
            type: 'object',
            properties: { a: { type: 'string' } },
          },
          target: 'app.x',
          op: '$y',
        },
      ],
    };
    expect(specViolations(spec)).toEqual([]);
  });
});
