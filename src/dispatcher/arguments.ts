/**
 * The `readArguments` step (PROTOCOL 6.1 step 2): arguments parsed (providers often send JSON
 * text), bounded before anything parses or walks them (64 levels, PROTOCOL section 2), checked
 * for what no mount can receive, recorded in the audit event as a digest, freed of the nulls
 * OpenAI strict mode sends for optional properties, and validated against the tool's
 * `inputSchema` by a validator compiled once per schema (a large one off the event loop).
 */
import type { CallEvent } from '../audit/events.js';
import type { CacheBounds } from '../bus/bounded-cache.js';
import { jsonShapeViolation, MAX_DEPTH, REQUEST_SHAPE, type ShapeViolation, sha256Hex } from '../bus/codec.js';
import { UnavailableError } from '../bus/errors.js';
import { type Check, Dialect, SchemaCompiler, TOOL_SCHEMA_CACHE } from '../bus/schema-compiler.js';
import type { JsonSchemaObject } from '../registry/types.js';
import { ThreadStopped } from '../worker-thread.js';
import { argumentName, failure } from './results.js';
import type { ToolCall } from './types.js';

export { argumentName, argumentsMessage } from './results.js';

/**
 * The arguments of a call, ready to send; throws `CallFailure` (`bad_request`, or `internal`
 * for a schema that does not compile). With `event`, records the arguments' digest and size
 * on it, whatever the outcome. A promise only while the tool's large schema is compiled off the
 * event loop (its first calls); then it rejects with the `CallFailure`.
 */
export function readArguments(
  call: ToolCall,
  schema: JsonSchemaObject,
  validators: ArgumentValidators,
  event?: CallEvent,
): Record<string, unknown> | Promise<Record<string, unknown>> {
  const raw = call.arguments;
  // JSON text is bounded before it is parsed (an object came inside a request the mount bounded).
  const shape = typeof raw === 'string' ? jsonShapeViolation(raw, REQUEST_SHAPE) : undefined;
  if (shape !== undefined) {
    if (event !== undefined) recordDigest(event, raw);
    throw failure.refusedArguments(call.name, shapeReason(shape));
  }
  const parsed = parseArguments(raw);
  if (!parsed.ok) throw failure.unreadableArguments(call.name, parsed.reason);
  const args = parsed.value;
  // JSON text that names no `__proto__` (not even through a \u escape) parsed into nothing to walk for it.
  const walk = typeof raw !== 'string' || raw.includes('__proto__') || raw.includes('\\u');
  // The walk that names where the problem is runs only when a plain one finds there is one.
  const problem = walk && !sendable(args, 1) ? unsendable(args, 1, '') : undefined;
  // Arguments past the bound are not stringified (that could exhaust the stack): text is hashed as it came.
  if (event !== undefined)
    recordDigest(event, problem === undefined ? args : typeof raw === 'string' ? raw : undefined);
  if (problem !== undefined) throw failure.refusedArguments(call.name, problem);
  let check: Check | Promise<Check>;
  try {
    check = validators.checkSoon(schema);
  } catch (err) {
    throw failure.schemaBroken(call.name, err);
  }
  const value = withoutStrictNulls(schema, args) as Record<string, unknown>;
  // Every violation of small arguments; large ones stop at their first (the bound of the report).
  const bytes = typeof raw === 'string' ? raw.length : (event?.argumentsBytes ?? Number.POSITIVE_INFINITY);
  const validated = (c: Check): Record<string, unknown> => {
    const violations = c(value, { bytes });
    if (violations !== undefined) throw failure.invalidArguments(call.name, violations);
    return value;
  };
  if (!(check instanceof Promise)) return validated(check);
  return check.then(validated, (err: unknown) => {
    throw err instanceof UnavailableError || err instanceof ThreadStopped
      ? failure.schemaCompiling(call.name, err)
      : failure.schemaBroken(call.name, err);
  });
}

/** Are arguments sendable: within the depth bound, no `__proto__` key? (`unsendable` says why not.) */
function sendable(node: object, depth: number): boolean {
  if (depth > MAX_DEPTH) return false;
  const array = Array.isArray(node);
  for (const key in node) {
    if (key === '__proto__' && !array) return false;
    const child = (node as Record<string, unknown>)[key];
    if (child !== null && typeof child === 'object' && !sendable(child, depth + 1)) return false;
  }
  return true;
}

/**
 * What makes arguments impossible to send, or undefined: nesting past the bound (JSON text was
 * measured before parsing; an object is measured here), or a `__proto__` key, which the
 * MessagePack decoders of every mount refuse (they would otherwise blame the approver).
 */
function unsendable(node: object, depth: number, path: string): string | undefined {
  if (depth > MAX_DEPTH) return `they nest deeper than ${MAX_DEPTH} levels`;
  const array = Array.isArray(node);
  for (const key in node) {
    const at = array ? `${path}/${key}` : `${path}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    if (key === '__proto__' && !array)
      return `they hold a key "__proto__" (${argumentName(at)}), which no mount accepts`;
    const child = (node as Record<string, unknown>)[key];
    const problem = child !== null && typeof child === 'object' ? unsendable(child, depth + 1, at) : undefined;
    if (problem !== undefined) return problem;
  }
  return undefined;
}

/**
 * Records a digest of the arguments (never the arguments) on the audit event: of their JSON text,
 * or of the text itself.
 */
function recordDigest(event: CallEvent, args: unknown): void {
  let text: string | undefined;
  try {
    text = typeof args === 'string' ? args : JSON.stringify(args);
  } catch {
    // Values JSON has no text for (a BigInt from a library caller): the event goes without a digest.
    return;
  }
  if (text === undefined) return;
  event.argumentsDigest = sha256Hex(text);
  event.argumentsBytes = Buffer.byteLength(text);
}

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

/** Why arguments over the shape bound are refused, in the words a model reads. */
function shapeReason(shape: ShapeViolation): string {
  return shape.keyword === 'maxDepth'
    ? `they nest deeper than ${MAX_DEPTH} levels`
    : `they ${shape.message.replace(/^holds/, 'hold')}`;
}

/**
 * Validators for tool input schemas: the tools dialect of the one schema compiler, kept by
 * schema object (resolutions are cached, so the same object comes back) and, failing that, by
 * the schema's text, within a bound of schema text.
 */
export class ArgumentValidators {
  private readonly compiler: SchemaCompiler;

  /**
   * @param bounds distinct schemas (`maxEntries`) and characters of schema text (`maxBytes`: Ajv's
   * code grows with it) kept compiled, the least recently used going first; default `TOOL_SCHEMA_CACHE`.
   */
  constructor(bounds: CacheBounds = TOOL_SCHEMA_CACHE) {
    this.compiler = new SchemaCompiler(Dialect.Tools, [], bounds);
  }

  /** Characters of schema text compiled now, and how many schemas: what the bounds hold. */
  get size(): { schemas: number; text: number } {
    return this.compiler.size;
  }

  /** The check of a schema; throws if the schema does not compile. */
  check(schema: JsonSchemaObject): Check {
    return this.compiler.check(schema);
  }

  /**
   * The check of a schema, or while a large one is compiled off the event loop, a promise of
   * it (`SchemaCompiler.checkSoon`).
   */
  checkSoon(schema: JsonSchemaObject): Check | Promise<Check> {
    return this.compiler.checkSoon(schema);
  }
}

/*
 * OpenAI strict mode round-trips (see `registry/strict.ts`): strict rendering makes every
 * optional property required and nullable, so a strict model sends `{"mount": null}` where it
 * means "no mount". Such a null counts as absent before validation, and only such a null: the
 * property is optional in the tool's own schema, and its own schema does not accept null. A null
 * on a required property, or on one whose schema allows null, is left for validation to judge.
 */

/**
 * `value` without the nulls strict rendering put where `schema` has optional properties; the same
 * object when there are none.
 */
export function withoutStrictNulls(schema: unknown, value: unknown): unknown {
  if (value === null || typeof value !== 'object' || !isObjectSchema(schema)) return value;
  if (Array.isArray(value)) return itemsWithoutNulls(schema.items, value);
  const properties = schema.properties;
  if (properties === null || typeof properties !== 'object') return value;
  const required: unknown[] = Array.isArray(schema.required) ? schema.required : [];
  let out: Record<string, unknown> | undefined;
  for (const key of Object.keys(value)) {
    if (!Object.hasOwn(properties, key)) continue;
    const property = (properties as Record<string, unknown>)[key];
    const child = (value as Record<string, unknown>)[key];
    if (child === null) {
      if (required.includes(key) || acceptsNull(property)) continue;
      out ??= { ...value };
      delete out[key];
      continue;
    }
    const cleaned = withoutStrictNulls(property, child);
    if (cleaned !== child) {
      out ??= { ...value };
      out[key] = cleaned;
    }
  }
  return out ?? value;
}

/** Strict rendering follows `items` too: an array of objects may hold such nulls in each. */
function itemsWithoutNulls(items: unknown, value: unknown[]): unknown[] {
  if (!isObjectSchema(items)) return value;
  let out: unknown[] | undefined;
  value.forEach((item, i) => {
    const cleaned = withoutStrictNulls(items, item);
    if (cleaned !== item) (out ??= [...value])[i] = cleaned;
  });
  return out ?? value;
}

type SchemaNode = Record<string, unknown>;

/** A schema node that strict rendering descends into (an object, or an array of them). */
function isObjectSchema(schema: unknown): schema is SchemaNode {
  if (schema === null || typeof schema !== 'object') return false;
  const type = (schema as SchemaNode).type;
  return (
    type === 'object' ||
    type === 'array' ||
    (Array.isArray(type) && (type.includes('object') || type.includes('array')))
  );
}

/**
 * Whether a property's own schema takes null: by `const`, `enum` or `type`, or a branch of
 * `anyOf`/`oneOf` that does; a schema that constrains none of these takes anything. A `$ref`
 * is not followed: strict rendering made it nullable, so its null is one a strict model sent.
 */
export function acceptsNull(schema: unknown): boolean {
  if (typeof schema === 'boolean') return schema;
  if (schema === null || typeof schema !== 'object') return false;
  const s = schema as SchemaNode;
  if ('const' in s) return s.const === null;
  if (Array.isArray(s.enum)) return s.enum.includes(null);
  if (typeof s.type === 'string') return s.type === 'null';
  if (Array.isArray(s.type)) return s.type.includes('null');
  for (const branches of [s.anyOf, s.oneOf]) if (Array.isArray(branches)) return branches.some(acceptsNull);
  return s.$ref === undefined;
}
