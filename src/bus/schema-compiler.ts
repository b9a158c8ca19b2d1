/**
 * The one place JSON Schemas are compiled: the contracts of `contracts/` (strict) and the input
 * schemas of registered tools (lenient: many authors, many drafts), behind one validator
 * interface (as the MCP SDK has one): `check(schema)` gives a `Check`, compiled once and kept
 * under one cache policy, bounded in bytes of schema text. A check stops at a bounded number of
 * violations: a value larger than `FULL_REPORT_MAX_BYTES` stops at its first, and at most
 * `MAX_LISTED_VIOLATIONS` are listed; `describeViolations` words a list the same way everywhere.
 */
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import { BoundedCache, type CacheBounds } from './bounded-cache.js';
import type { Violation } from './errors.js';

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
  /** The value's size in bytes, as it came; past `FULL_REPORT_MAX_BYTES` the check stops at the first violation. Default 0. */
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

function newAjv(dialect: Dialect, allErrors: boolean): Ajv2020 {
  if (dialect === Dialect.Contracts)
    return new Ajv2020({ allErrors, strict: true, verbose: true, allowUnionTypes: true });
  // Meta-validation is asked for (`metaViolations`), not done by every compile: a `$schema` of another draft still compiles.
  return new Ajv2020({
    allErrors,
    strict: false,
    verbose: true,
    logger: false,
    validateFormats: false,
    validateSchema: false,
  });
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
    let check = this.byObject.get(schema);
    if (check !== undefined) return check;
    const text = JSON.stringify(schema);
    check = this.byText.get(text);
    if (check === undefined) {
      const validate = this.compile(false, schema);
      let first: ValidateFunction | undefined;
      check = this.bounded(validate, () => (first ??= this.compile(true, schema)));
      this.byText.set(text, check, text.length);
    }
    this.byObject.set(schema, check);
    return check;
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

  /** Where a schema breaks the JSON Schema meta-schema (2020-12, whatever its `$schema`), one violation per path under `at`. */
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

/** A violations report as an error's `details`: at most `MAX_LISTED_VIOLATIONS` listed, the rest counted. */
export function violationDetails(violations: readonly Violation[]): {
  violations: Violation[];
  moreViolations?: number;
} {
  const listed = violations.slice(0, MAX_LISTED_VIOLATIONS);
  return violations.length > listed.length
    ? { violations: listed, moreViolations: violations.length - listed.length }
    : { violations: listed };
}

/**
 * The first violations in one line, `<path> <message>; …`, then `(and N more)`: how every
 * refusal words a list. `empty` names the path `''` (the body, the resolve, the arguments).
 */
export function describeViolations(
  violations: readonly Violation[],
  options: { shown?: number; empty?: string; name?: (path: string) => string } = {},
): string {
  const shown = options.shown ?? DESCRIBED_VIOLATIONS;
  const name = options.name ?? ((path: string) => path || (options.empty ?? '(body)'));
  const first = violations
    .slice(0, shown)
    .map((v) => `${name(v.path)} ${v.message}`)
    .join('; ');
  return violations.length > shown ? `${first} (and ${violations.length - shown} more)` : first;
}
