/**
 * Tool arguments: parsed (providers often send JSON text), validated against the tool's
 * `inputSchema` by a validator compiled once per schema, and explained in words a model
 * can act on.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { Violation } from '../bus/errors.js';
import { type Check, violationsOf } from '../contracts/schemas.js';
import type { JsonSchemaObject } from '../registry/types.js';

/** Parsed arguments, or why they could not be parsed. */
export type ParsedArguments = { ok: true; value: Record<string, unknown> } | { ok: false; reason: string };

/** Arguments as the call carried them: an object, JSON text of one, or nothing (`{}`). */
export function parseArguments(raw: Record<string, unknown> | string | undefined): ParsedArguments {
  if (raw === undefined) return { ok: true, value: {} };
  let value: unknown = raw;
  if (typeof raw === 'string') {
    if (raw.trim() === '') return { ok: true, value: {} };
    try {
      value = JSON.parse(raw);
    } catch (err) {
      return { ok: false, reason: `they are not valid JSON (${(err as Error).message})` };
    }
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { ok: false, reason: 'they must be a JSON object of named arguments' };
  }
  return { ok: true, value: value as Record<string, unknown> };
}

/**
 * Validators for tool input schemas, compiled once and reused: by schema object (resolutions
 * are cached, so the same object comes back) and, failing that, by the schema's text.
 */
export class ArgumentValidators {
  private ajv = ArgumentValidators.newAjv();
  private byObject = new WeakMap<object, Check>();
  private readonly byText = new Map<string, Check>();

  /** @param maxSchemas distinct schemas kept compiled; past it the cache starts afresh. */
  constructor(private readonly maxSchemas = 5_000) {}

  // Tool schemas come from many authors and drafts: unknown keywords and formats are allowed.
  private static newAjv(): Ajv2020 {
    return new Ajv2020({ allErrors: true, strict: false, verbose: true, logger: false, validateFormats: false });
  }

  /** The check of a schema; throws if the schema does not compile. */
  check(schema: JsonSchemaObject): Check {
    let check = this.byObject.get(schema);
    if (check !== undefined) return check;
    const text = JSON.stringify(schema);
    check = this.byText.get(text);
    if (check === undefined) {
      if (this.byText.size >= this.maxSchemas) {
        // A registry that churns through schemas must not grow this cache (and ajv's) forever.
        this.byText.clear();
        this.byObject = new WeakMap();
        this.ajv = ArgumentValidators.newAjv();
      }
      const validate = this.ajv.compile(schema);
      check = (value) => (validate(value) ? undefined : violationsOf(validate.errors));
      this.byText.set(text, check);
    }
    this.byObject.set(schema, check);
    return check;
  }
}

/** `/a/0/b` → `a[0].b`: how a model names an argument. */
export function argumentName(pointer: string): string {
  if (pointer === '') return 'the arguments';
  const name = pointer
    .slice(1)
    .split('/')
    .map((t) => t.replaceAll('~1', '/').replaceAll('~0', '~'))
    .map((t, i) => (/^\d+$/.test(t) ? `[${t}]` : i === 0 ? t : `.${t}`))
    .join('');
  return `argument "${name}"`;
}

/** One sentence per violation, then what to do. */
export function argumentsMessage(tool: string, violations: readonly Violation[]): string {
  const listed = violations.slice(0, 20).map((v) => `${argumentName(v.path)} ${v.message}`);
  const more = violations.length > 20 ? ` (and ${violations.length - 20} more)` : '';
  return `Invalid arguments for "${tool}": ${listed.join('; ')}${more}. Fix the arguments and call "${tool}" again.`;
}
