/**
 * The one place JSON Schemas are compiled: the contracts of `contracts/` (strict) and the input
 * schemas of registered tools (lenient: many authors, many drafts), behind one validator
 * interface (as the MCP SDK has one): `check(schema)` gives a `Check`, compiled once and kept
 * under one cache policy, bounded in bytes of schema text. A check stops at a bounded number of
 * violations: a value larger than `FULL_REPORT_MAX_BYTES` stops at its first, and at most
 * `MAX_LISTED_VIOLATIONS` are listed; `describeViolations` words a list the same way everywhere.
 *
 * A tool schema of `OFF_LOOP_SCHEMA_CHARS` or more is compiled off the event loop (`checkSoon`):
 * Ajv writes its validators' code on the compiler thread, which runs them once so that V8's code
 * cache holds them compiled; the event loop then loads that code from the cache. A 31 KB schema
 * (the largest a tool may have) costs 0.1-1.7 s to compile in-process (idle to loaded), ~0.1 s
 * of it V8 compiling Ajv's 646 KB of code on the first call; loaded from the cache, 4-30 ms.
 */
import { createRequire } from 'node:module';
import { Script } from 'node:vm';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import standaloneCode from 'ajv/dist/standalone/index.js';
import { ThreadStopped, WorkerThread } from '../worker-thread.js';
import { BoundedCache, type CacheBounds } from './bounded-cache.js';
import { UnavailableError, type Violation } from './errors.js';

/** Most violations a report lists; `details.moreViolations` counts the rest. */
export const MAX_LISTED_VIOLATIONS = 10;
/** Violations a one-line description names before "(and N more)". */
const DESCRIBED_VIOLATIONS = 3;
/**
 * Values of at most this many bytes (their encoded size, as the caller knows it) are checked
 * for every violation; a larger one is checked until its first. Collecting and wording every
 * violation of 60,000 unknown keys cost 380-640 ms; of 16 KiB, under a millisecond.
 */
export const FULL_REPORT_MAX_BYTES = 16 * 1024;

/** How much of a value's violations to collect. */
export interface CheckOptions {
  /**
   * The value's size in bytes, as it came; past `FULL_REPORT_MAX_BYTES` the check stops at the
   * first violation. Default 0.
   */
  bytes?: number;
}

/** A validator compiled once: `undefined` when valid, else its violations (every one, or the first, by size). */
export type Check = (value: unknown, options?: CheckOptions) => Violation[] | undefined;

/** The dialects schemas are compiled in. */
export const Dialect = {
  /** `contracts/`: strict, every keyword known. */
  Contracts: 'contracts',
  /** Tool input schemas: unknown keywords and formats allowed, formats not validated. */
  Tools: 'tools',
} as const;
export type Dialect = (typeof Dialect)[keyof typeof Dialect];

/** Compilations one Ajv instance serves before it is replaced (Ajv keeps every function it compiled). */
const COMPILATIONS_PER_INSTANCE = 512;

/** The default bound of compiled tool schemas: 8 MiB of schema text, 5,000 schemas. */
export const TOOL_SCHEMA_CACHE: CacheBounds = { maxEntries: 5_000, maxBytes: 8 * 1024 * 1024 };

/**
 * Tool schemas of at least this many characters of JSON are compiled on the compiler thread. The
 * costliest shape per character (objects within objects) takes 4-40 ms to compile at 4 KiB, on
 * a loaded machine; 30-90 ms at 8 KiB.
 */
export const OFF_LOOP_SCHEMA_CHARS = 4 * 1024;

/**
 * Compilations the compiler thread holds at once (running and queued); past it a first call is
 * refused as unavailable.
 */
export const MAX_QUEUED_COMPILES = 64;

function newAjv(dialect: Dialect, allErrors: boolean, source = false): Ajv2020 {
  if (dialect === Dialect.Contracts)
    return new Ajv2020({ allErrors, strict: true, verbose: true, allowUnionTypes: true });
  // Meta-validation is asked for (`metaViolations`), not done by every compile: a `$schema` of
  // another draft still compiles.
  return new Ajv2020({
    allErrors,
    strict: false,
    verbose: true,
    logger: false,
    validateFormats: false,
    validateSchema: false,
    ...(source ? { code: { source: true } } : {}),
  });
}

/** One validator as code, with V8's cache of that code compiled. */
export interface CompiledScript {
  /** A script whose value is `(require) => validate`. */
  script: string;
  /** `Script.createCachedData()` after the validator ran once (V8 compiles a function on its first call). */
  cache: Uint8Array;
}

/** A schema's two validators as code: of every violation, and of the first only. */
export interface ValidatorCode {
  all: CompiledScript;
  first: CompiledScript;
}

const SCRIPT_NAME = 'matrix-tool-validator.js';
const runtime = createRequire(import.meta.url);

/**
 * The compiler thread's work: a tool schema's (JSON text) validators as code, compiled and run
 * once, with the cache of their compiled code. Throws Ajv's error when the schema does not compile.
 */
export function validatorCode(schemaText: string): ValidatorCode {
  const schema = JSON.parse(schemaText) as Record<string, unknown>;
  return { all: compiledScript(schema, true), first: compiledScript(schema, false) };
}

function compiledScript(schema: Record<string, unknown>, allErrors: boolean): CompiledScript {
  const ajv = newAjv(Dialect.Tools, allErrors, true);
  // Ajv's standalone module (CommonJS), wrapped as a function of its `require`.
  const code = standaloneCode.default(ajv, ajv.compile(schema));
  const script = `(function (require) { const module = { exports: {} }; (function (module, exports) {\n${code}\n})(module, module.exports); return module.exports.default; })`;
  const compiled = new Script(script, { filename: SCRIPT_NAME });
  validatorOf(compiled)({});
  return { script, cache: compiled.createCachedData() };
}

/**
 * The validator of a `CompiledScript`, from V8's cache of its code (a few ms; compiling it would
 * cost ~20 times that).
 */
function loadValidator(code: CompiledScript): ValidateFunction {
  return validatorOf(new Script(code.script, { filename: SCRIPT_NAME, cachedData: Buffer.from(code.cache) }));
}

function validatorOf(script: Script): ValidateFunction {
  return (script.runInThisContext() as (require: NodeJS.Require) => ValidateFunction)(runtime);
}

let compilerThread: WorkerThread<string, ValidatorCode> | undefined;

/**
 * Ends the compiler thread, if it runs: compilations in flight fail (`ThreadStopped`); the next one
 * starts it again.
 */
export async function stopCompilerThread(): Promise<void> {
  await compilerThread?.close();
}

/** The one compiler thread of the process, started on first use. */
function compilerThreadOf(): WorkerThread<string, ValidatorCode> {
  compilerThread ??= new WorkerThread<string, ValidatorCode>(
    new URL('./compile-worker.js', import.meta.url),
    MAX_QUEUED_COMPILES,
    (held) => `this service is compiling ${held} input schemas already; retry shortly`,
  );
  return compilerThread;
}

/**
 * Compiles and keeps checks of one dialect. Schemas given to the constructor (the contracts)
 * are added once and never evicted; others are kept by their text, least recently used first
 * out, within `bounds`.
 */
export class SchemaCompiler {
  private all: Ajv2020;
  private first: Ajv2020 | undefined;
  private uses = 0;
  private readonly byObject = new WeakMap<object, Check>();
  private readonly byText: BoundedCache<Check>;
  private readonly verdicts: BoundedCache<string | null>;
  private readonly byId = new Map<string, Check>();
  /** Compilations on the compiler thread, by schema text: each schema is compiled once however many wait. */
  private readonly compiling = new Map<string, Promise<Check>>();

  constructor(
    private readonly dialect: Dialect,
    private readonly schemas: ReadonlyArray<Record<string, unknown>> = [],
    bounds: CacheBounds = TOOL_SCHEMA_CACHE,
  ) {
    this.all = this.instance(true);
    this.byText = new BoundedCache<Check>(bounds);
    this.verdicts = new BoundedCache<string | null>(bounds);
  }

  /** The raw schema of an `$id` added at construction. */
  schema(id: string): Record<string, unknown> {
    const s = this.all.getSchema(id)?.schema;
    if (s === undefined || typeof s !== 'object') throw new Error(`no schema ${id} in contracts/`);
    return s as Record<string, unknown>;
  }

  /** The check of an `$id` added at construction, compiled once. */
  checkId(id: string): Check {
    let check = this.byId.get(id);
    if (check === undefined) {
      const validate = this.all.getSchema(id);
      if (validate === undefined) throw new Error(`no schema ${id} in contracts/`);
      check = this.bounded(validate, () => this.firstErrorOnly().getSchema(id) as ValidateFunction);
      this.byId.set(id, check);
    }
    return check;
  }

  /** The check of a schema object; throws if it does not compile. Found by identity, else by text. */
  check(schema: Record<string, unknown>): Check {
    return this.byObject.get(schema) ?? this.compiled(schema, JSON.stringify(schema));
  }

  /**
   * The check of a schema object, as `check` gives it, except that a schema of
   * `OFF_LOOP_SCHEMA_CHARS` or more that is not compiled yet is compiled on the compiler thread:
   * then a promise of its check (which rejects if it does not compile, or, `UnavailableError`,
   * if the thread holds `MAX_QUEUED_COMPILES` already, or `ThreadStopped`, if the thread
   * stopped). Every caller of the same schema waits for the one compilation; callers of other
   * schemas do not wait for it.
   */
  checkSoon(schema: Record<string, unknown>): Check | Promise<Check> {
    const known = this.byObject.get(schema);
    if (known !== undefined) return known;
    const text = JSON.stringify(schema);
    const check = this.byText.get(text);
    if (check !== undefined) {
      this.byObject.set(schema, check);
      return check;
    }
    if (text.length < OFF_LOOP_SCHEMA_CHARS || this.schemas.length > 0) return this.compiled(schema, text);
    // A schema that did not compile is refused from memory: it is not sent to the thread again.
    const verdict = this.verdicts.get(text);
    if (typeof verdict === 'string') throw new Error(verdict);
    let compiling = this.compiling.get(text);
    if (compiling === undefined) {
      compiling = this.compileOffLoop(text);
      this.compiling.set(text, compiling);
    }
    return compiling.then((c) => {
      this.byObject.set(schema, c);
      return c;
    });
  }

  private compiled(schema: Record<string, unknown>, text: string): Check {
    let check = this.byText.get(text);
    if (check === undefined) {
      const validate = this.compile(false, schema);
      let first: ValidateFunction | undefined;
      check = this.bounded(validate, () => (first ??= this.compile(true, schema)));
      this.byText.set(text, check, text.length);
    }
    this.byObject.set(schema, check);
    return check;
  }

  private async compileOffLoop(text: string): Promise<Check> {
    try {
      const code = await compilerThreadOf().request(text);
      // Each loaded in a turn of its own: each holds the loop a few ms.
      const all = loadValidator(code.all);
      await new Promise((resolve) => setImmediate(resolve));
      const first = loadValidator(code.first);
      const check = this.bounded(all, () => first);
      this.byText.set(text, check, text.length);
      return check;
    } catch (err) {
      // Only Ajv's verdict is kept: a full queue or a thread that stopped says nothing of the schema.
      if (!(err instanceof UnavailableError || err instanceof ThreadStopped))
        this.verdicts.set(text, (err as Error).message, text.length);
      throw err;
    } finally {
      this.compiling.delete(text);
    }
  }

  /**
   * Throws Ajv's error when `schema` does not compile. Verdicts are kept by the schema's text
   * (compiling is most of a registration's cost; no remote refs are fetched), not the code.
   */
  compiles(schema: Record<string, unknown>): void {
    const text = JSON.stringify(schema);
    const known = this.verdicts.get(text);
    if (known === null) return;
    if (known !== undefined) throw new Error(known);
    try {
      this.compile(false, schema);
      this.verdicts.set(text, null, text.length);
    } catch (err) {
      this.verdicts.set(text, (err as Error).message, text.length);
      throw err;
    }
  }

  /**
   * Where a schema breaks the JSON Schema meta-schema (2020-12, whatever its `$schema`), one
   * violation per path under `at`.
   */
  metaViolations(schema: Record<string, unknown>, at: string): Violation[] {
    const { $schema: _ignored, ...rest } = schema;
    if (this.all.validateSchema(rest) === true) return [];
    // The meta-schema's anyOf reports one wrong keyword several ways: one violation per path.
    const byPath = new Map<string, Violation>();
    for (const e of this.all.errors ?? []) {
      const path = `${at}${e.instancePath}`;
      if (!byPath.has(path))
        byPath.set(path, { path, message: `is not valid JSON Schema: ${e.message ?? e.keyword}`, keyword: 'schema' });
    }
    return [...byPath.values()];
  }

  /** Compiled schemas held (outside the constructor's), and their text's length. */
  get size(): { schemas: number; text: number } {
    return { schemas: this.byText.size, text: this.byText.bytes };
  }

  private compile(firstOnly: boolean, schema: Record<string, unknown>): ValidateFunction {
    const evicting = this.schemas.length === 0;
    if (evicting && ++this.uses > COMPILATIONS_PER_INSTANCE) {
      // Fresh instances: the old ones' compiled functions go once no kept check uses them.
      this.all = this.instance(true);
      this.first = undefined;
      this.uses = 1;
    }
    const ajv = firstOnly ? this.firstErrorOnly() : this.all;
    try {
      return ajv.compile(schema);
    } finally {
      if (evicting) ajv.removeSchema(schema);
    }
  }

  private firstErrorOnly(): Ajv2020 {
    return (this.first ??= this.instance(false));
  }

  private instance(allErrors: boolean): Ajv2020 {
    const ajv = newAjv(this.dialect, allErrors);
    for (const schema of this.schemas) ajv.addSchema(schema);
    return ajv;
  }

  /** A check that reports every violation of a small value, and the first of a large one. */
  private bounded(all: ValidateFunction, first: () => ValidateFunction): Check {
    return (value, options) => {
      if ((options?.bytes ?? 0) <= FULL_REPORT_MAX_BYTES) return all(value) ? undefined : violationsOf(all.errors);
      const validate = first();
      return validate(value) ? undefined : violationsOf(validate.errors);
    };
  }
}

/** Ajv's errors as protocol violations: each names the exact field, in words that say what to do. */
export function violationsOf(errors: ErrorObject[] | null | undefined): Violation[] {
  if (!errors) return [];
  const out: Violation[] = [];
  const seen = new Set<string>();
  for (const e of errors) {
    const v = violationOf(e);
    if (v === undefined) continue;
    const id = `${v.path}\u0000${v.message}`;
    if (seen.has(id)) continue;
    seen.add(id);
    out.push(v);
  }
  return out;
}

function violationOf(e: ErrorObject): Violation | undefined {
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return {
        path: `${e.instancePath}/${escapePointer(String(p.missingProperty))}`,
        message: 'is required',
        keyword: e.keyword,
      };
    case 'additionalProperties': {
      const known = Object.keys((e.parentSchema as { properties?: object } | undefined)?.properties ?? {});
      const hint = known.length > 0 ? ` (known fields: ${known.join(', ')})` : '';
      return {
        path: `${e.instancePath}/${escapePointer(String(p.additionalProperty))}`,
        message: `is not a known field${hint}`,
        keyword: e.keyword,
      };
    }
    case 'enum':
      return {
        path: e.instancePath,
        message: `must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`,
        keyword: e.keyword,
      };
    case 'const':
      return { path: e.instancePath, message: `must be ${JSON.stringify(p.allowedValue)}`, keyword: e.keyword };
    case 'if':
      return undefined; // the failing branch reports itself
    default:
      return { path: e.instancePath, message: e.message ?? `fails ${e.keyword}`, keyword: e.keyword };
  }
}

function escapePointer(token: string): string {
  return token.replaceAll('~', '~0').replaceAll('/', '~1');
}

/**
 * A list cut to its first `shown` items, as every message and report that lists says so: `list`
 * words the items kept (all of them, uncut, when there are no more), and `more` adds to that
 * what it says of the `left` left out.
 */
export function firstAndMore<T, R>(
  items: readonly T[],
  shown: number,
  list: (first: readonly T[]) => R,
  more: (listed: R, left: number) => R,
): R {
  if (items.length <= shown) return list(items);
  return more(list(items.slice(0, shown)), items.length - shown);
}

/** A violations report as an error's `details`: at most `MAX_LISTED_VIOLATIONS` listed, the rest counted. */
export function violationDetails(violations: readonly Violation[]): {
  violations: Violation[];
  moreViolations?: number;
} {
  return firstAndMore(
    violations,
    MAX_LISTED_VIOLATIONS,
    (first) => ({ violations: first.slice() }),
    (listed, left) => ({ violations: listed.violations, moreViolations: left }),
  );
}

/**
 * The first violations in one line, `<path> <message>; …`, then `(and N more)`: how every
 * refusal words a list. `empty` names the path `''` (the body, the resolve, the arguments).
 */
export function describeViolations(
  violations: readonly Violation[],
  options: { shown?: number; empty?: string; name?: (path: string) => string } = {},
): string {
  const name = options.name ?? ((path: string) => path || (options.empty ?? '(body)'));
  return firstAndMore(
    violations,
    options.shown ?? DESCRIBED_VIOLATIONS,
    (first) => first.map((v) => `${name(v.path)} ${v.message}`).join('; '),
    (text, left) => `${text} (and ${left} more)`,
  );
}
