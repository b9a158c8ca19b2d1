import { afterAll, describe, expect, it } from 'vitest';
import { BadRequestError, ForbiddenError, PayloadTooLargeError, UnavailableError } from '../../src/bus/errors.js';
import { builtinContexts } from '../../src/registry/builtins.js';
import { RegistrationChecker } from '../../src/registry/checker.js';
import { resolutionOverflow } from '../../src/registry/fit.js';
import { resolveToolContext } from '../../src/registry/resolver.js';
import { StaticStore, storedBuiltin } from '../../src/registry/store.js';
import type { MatrixToolProjection, ToolContextSpec } from '../../src/registry/types.js';
import { registrationError, specViolations } from '../../src/registry/validate.js';

const spec = (key: string, tools: MatrixToolProjection[]): ToolContextSpec => ({
  key,
  title: `Title ${key}`,
  description: `Context ${key}`,
  matrixTools: tools,
  permissions: { approval: 'never' },
});
const tool = (name: string, extra: Partial<MatrixToolProjection> = {}): MatrixToolProjection => ({
  name,
  description: 'd',
  inputSchema: { type: 'object' },
  target: 'app.things',
  op: '$do',
  ...extra,
});

describe('the checks of $register', () => {
  it('keeps compiling schemas right across thousands of checks, the same $id again and again', () => {
    // Each schema text new (no remembered verdict): past two renewals of the shared compiler.
    const withId = (i: number) => ({
      type: 'object' as const,
      $id: 'https://example.invalid/args.json',
      properties: { [`a${i}`]: { type: 'string' } },
    });
    const broken = { type: 'object' as const, properties: { a: { $ref: '#/$defs/missing' } } };
    for (let i = 0; i < 1_100; i++) {
      expect(specViolations(spec(`ok-${i}`, [tool('t', { inputSchema: withId(i) })]))).toEqual([]);
      if (i % 100 === 0) {
        const violations = specViolations(spec(`bad-${i}`, [tool('t', { inputSchema: structuredClone(broken) })]));
        expect(violations).toEqual([
          expect.objectContaining({ path: '/matrixTools/0/inputSchema', keyword: 'compile' }),
        ]);
      }
    }
  });

  it('says which check a spec fails, by error class', () => {
    expect(registrationError({ key: 'x' })).toBeInstanceOf(BadRequestError);
    expect(registrationError(spec('x', [tool('matrix_invoke')]))).toBeInstanceOf(ForbiddenError);
    expect(registrationError(spec('x', [tool('fine', { target: 'system.dispatcher', op: '$call' })]))).toBeInstanceOf(
      ForbiddenError,
    );
    expect(registrationError(spec('actor-edit', [tool('fine')]))).toBeInstanceOf(ForbiddenError);
    expect(registrationError(spec('x', [tool('fine')]), { maxPayload: 1024 * 1024 })).toBeUndefined();
  });

  it("refuses the built-in tools' names, the worker SDKs', and their lookalikes", () => {
    for (const name of [
      'matrix_invoke',
      'MATRIX_INVOKE',
      'matrix-invoke',
      'MatrixInvoke',
      'matrix_lnvoke',
      'write_file',
      'Write-File',
      'read_fiIe',
      'RUN_SHELL',
      'run_she1l',
      'Bash',
      'bash',
      'apply_patch',
      'Write',
      'tool_search',
      'search_tools',
      'Search-Tools',
    ]) {
      const error = registrationError(spec('x', [tool(name)]));
      expect(error, name).toBeInstanceOf(ForbiddenError);
      expect(error?.message, name).toMatch(/built-in tool|worker SDKs'/);
    }
    expect(
      registrationError(spec('x', [tool('matrix_invoker'), tool('fs_write_file'), tool('bash_history')])),
    ).toBeUndefined();
  });

  it('refuses every sdkTools entry of a registered context: only a built-in context gives the worker its tools', () => {
    for (const name of ['run_shell', 'local_lint', 'Bash', 'exec_command']) {
      const error = registrationError({ ...spec('x', [tool('fine')]), sdkTools: [name] });
      expect(error, name).toBeInstanceOf(ForbiddenError);
      expect(error?.message, name).toContain(
        '/spec/sdkTools/0 ' + name + ": a registered context may not name the worker's own tools",
      );
    }
  });

  it('refuses a context too large for max_payload in any rendering, and only then', () => {
    const big = (n: number) =>
      spec(
        'big',
        Array.from({ length: n }, (_, i) => tool(`t${i}`, { description: 'd'.repeat(8_000) })),
      );
    expect(registrationError(big(110), { maxPayload: 1024 * 1024 })).toBeInstanceOf(PayloadTooLargeError);
    expect(registrationError(big(40), { maxPayload: 1024 * 1024 })).toBeUndefined();
    // 70 tools of 8,000 characters: 560 KB as a spec, over 1 MB once each tool appears twice.
    expect(resolutionOverflow(big(70), 1024 * 1024)).toMatchObject({ format: 'openai' });
    // The shortcut for small stored contexts agrees with the full check on both sides of the line.
    for (const n of [1, 10, 40, 70, 110]) {
      const s = big(n);
      const stored = new TextEncoder().encode(JSON.stringify(s)).length;
      expect(resolutionOverflow(s, 1024 * 1024, stored) === undefined).toBe(
        resolutionOverflow(s, 1024 * 1024) === undefined,
      );
    }
  });

  it('bounds strict mode’s growth and diagnostics, so the shortcut stays on the safe side', () => {
    const properties = (n: number, extra: object) =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { ...extra }]));
    const wide = (n: number) =>
      spec('wide', [tool('t', { inputSchema: { type: 'object', properties: properties(n, {}) } })]);
    const deep = (depth: number, keywords: number): ToolContextSpec => {
      let schema: Record<string, unknown> = {
        type: 'object',
        properties: properties(keywords, { type: 'string', minLength: 1, default: 'x' }),
      };
      for (let d = 0; d < depth; d++)
        schema = { type: 'object', properties: { [`level_${'n'.repeat(50)}_${d}`]: schema } };
      return spec('deep', [tool('t', { inputSchema: schema as MatrixToolProjection['inputSchema'] })]);
    };
    for (const s of [wide(2_000), wide(10_000), wide(30_000), deep(25, 2_000)]) {
      const stored = new TextEncoder().encode(JSON.stringify(s)).length;
      expect(resolutionOverflow(s, 1024 * 1024, stored) === undefined).toBe(
        resolutionOverflow(s, 1024 * 1024) === undefined,
      );
    }
    const registry = resolveToolContext(
      { profile: 'p', toolContextRefs: ['deep'], format: 'openai', strict: true },
      soleStore(deep(25, 2_000)),
    );
    const removed = registry.diagnostics.find((d) => d.code === 'strict_removed');
    expect(removed?.message).toMatch(/and 3990 more; removed$/);
    expect(removed?.message.length).toBeLessThan(700);
  });
});

/** The built-ins and one registered context. */
function soleStore(s: ToolContextSpec): StaticStore {
  return new StaticStore([...builtinContexts.map(storedBuiltin), { spec: s, source: 'registered', revision: 1 }], 1);
}

describe('the checks of $register, on the checker thread', () => {
  const checker = new RegistrationChecker(2);
  afterAll(() => checker.close());
  const tools = (n: number, salt: string): MatrixToolProjection[] =>
    Array.from({ length: n }, (_, i) => ({
      name: `t${i}`,
      description: 'a tool',
      inputSchema: { type: 'object', properties: { [`${salt}${i}`]: { type: 'string', pattern: '^[a-z]+$' } } },
      target: 'app.x',
      op: '$run',
    }));
  const spec = (salt: string, matrixTools = tools(8, salt)): ToolContextSpec => ({
    key: `sliced-${salt}`,
    title: 'Sliced',
    description: 'many tools',
    matrixTools,
    permissions: { approval: 'never' },
  });

  it('lets the event loop run while a spec is checked', async () => {
    let ran = 0;
    let ticking = true;
    const tick = () => {
      ran++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const checking = checker.check(JSON.stringify(spec('a')), { maxPayload: 1024 * 1024 });
    const error = await checking;
    ticking = false;
    expect(error).toBeUndefined();
    expect(ran).toBeGreaterThanOrEqual(8);
  });

  it('finds what the checks in one piece find', async () => {
    const broken = spec('b', [
      ...tools(2, 'b'),
      {
        ...tools(1, 'c')[0],
        name: 't0',
        inputSchema: { type: 'object', properties: { x: { type: 'nope' } } },
      } as MatrixToolProjection,
    ]);
    const checked = await checker.check(JSON.stringify(broken), {});
    expect(checked?.message).toBe(registrationError(broken)?.message);
    expect(checked?.details).toEqual(registrationError(broken)?.details);
    expect(checked).toBeInstanceOf(BadRequestError);
  });

  it('refuses a check past its bound as unavailable, and checks the ones it holds', async () => {
    const held = [checker.check(JSON.stringify(spec('d')), {}), checker.check(JSON.stringify(spec('e')), {})];
    await expect(checker.check(JSON.stringify(spec('f')), {})).rejects.toBeInstanceOf(UnavailableError);
    expect(await Promise.all(held)).toEqual([undefined, undefined]);
  });
});
