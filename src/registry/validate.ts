/**
 * What `$register` checks, and what a context read back from KV is checked against: the
 * schema, tool names unique within the context, input schemas that compile, approval names
 * that exist; no built-in key, no target on a reserved subject, no built-in tool's name; and
 * a resolution that fits in a reply.
 */

import { contracts, SchemaId } from '../bus/contracts.js';
import {
  BadRequestError,
  ForbiddenError,
  type MatrixError,
  PayloadTooLargeError,
  type Violation,
} from '../bus/errors.js';
import { Dialect, describeViolations, SchemaCompiler, violationDetails } from '../bus/schema-compiler.js';
import { isReservedSubject, opSubject } from '../bus/subjects.js';
import { BUILTIN_TOOL_NAMES, builtinContexts, reservedLookalike } from './builtins.js';
import { resolutionOverflow } from './fit.js';
import type { ToolContextSpec } from './types.js';

/**
 * Longest input schema of one tool, in characters of JSON. Real tool schemas are a few KB (what
 * an LLM reads of them costs tokens); compiling one is what makes a check expensive.
 */
export const MAX_INPUT_SCHEMA_CHARS = 32 * 1024;

/**
 * The compiler `$register` and `system.packages` check with, shared (the tools dialect of the one
 * schema compiler): it keeps verdicts by schema text within `TOOL_SCHEMA_CACHE` (a context
 * registered again, or schemas many contexts share, compile once) and replaces its Ajv
 * instance after a bounded number of compilations (Ajv keeps every function it compiled).
 */
const sharedCompiler = new SchemaCompiler(Dialect.Tools);

/**
 * Every violation of a spec, with paths under `prefix`; empty when the spec is valid. With
 * `compiler` null, input schemas are checked against the meta-schema but not compiled.
 */
export function specViolations(
  spec: unknown,
  prefix = '',
  compiler: Pick<SchemaCompiler, 'compiles' | 'metaViolations'> | null = sharedCompiler,
): Violation[] {
  const schemaViolations = contracts().check(SchemaId.ToolContextSpec)(spec);

  if (schemaViolations !== undefined) return schemaViolations.map((v) => ({ ...v, path: prefix + v.path }));
  const s = spec as ToolContextSpec;
  const violations: Violation[] = [];
  const firstByName = new Map<string, number>();
  for (const [i, tool] of (s.matrixTools ?? []).entries()) {
    const at = `${prefix}/matrixTools/${i}`;
    const first = firstByName.get(tool.name);
    if (first === undefined) firstByName.set(tool.name, i);
    else
      violations.push({
        path: `${at}/name`,
        message: `repeats the name of ${prefix}/matrixTools/${first}`,
        keyword: 'uniqueName',
      });
    const outputSize = tool.outputSchema === undefined ? 0 : JSON.stringify(tool.outputSchema).length;
    if (outputSize > MAX_INPUT_SCHEMA_CHARS)
      violations.push({
        path: `${at}/outputSchema`,
        message: `is ${outputSize} characters of JSON; a tool's output schema may have ${MAX_INPUT_SCHEMA_CHARS}`,
        keyword: 'maxSize',
      });
    const size = JSON.stringify(tool.inputSchema).length;
    if (size > MAX_INPUT_SCHEMA_CHARS) {
      // Compiling is the costly part of a check (a 720 KB schema held an instance for ~3 s): not past the bound.
      violations.push({
        path: `${at}/inputSchema`,
        message: `is ${size} characters of JSON; a tool's input schema may have ${MAX_INPUT_SCHEMA_CHARS}`,
        keyword: 'maxSize',
      });
      continue;
    }
    const meta = (compiler ?? sharedCompiler).metaViolations(tool.inputSchema, `${at}/inputSchema`);
    violations.push(...meta);
    if (meta.length === 0 && compiler !== null) {
      try {
        compiler.compiles(tool.inputSchema);
      } catch (err) {
        violations.push({
          path: `${at}/inputSchema`,
          message: `is not a JSON Schema that compiles: ${(err as Error).message}`,
          keyword: 'compile',
        });
      }
    }
  }
  const approval = s.permissions.approval;
  if (typeof approval === 'object') {
    approval.tools.forEach((name, i) => {
      if (!firstByName.has(name)) {
        violations.push({
          path: `${prefix}/permissions/approval/tools/${i}`,
          message: `names no tool of this context ('${name}')`,
          keyword: 'knownTool',
        });
      }
    });
  }
  return violations;
}

/** Paths of tools that target a reserved subject. */
export function reservedTargets(spec: ToolContextSpec, prefix = ''): Violation[] {
  return (spec.matrixTools ?? []).flatMap((tool, i) =>
    isReservedTarget(tool.target, tool.op)
      ? [
          {
            path: `${prefix}/matrixTools/${i}/target`,
            message: `${tool.target} is reserved: no registered tool may target it`,
            keyword: 'reserved',
          },
        ]
      : [],
  );
}

function isReservedTarget(target: string, op: string): boolean {
  return isReservedSubject(opSubject(target, op));
}

/**
 * Paths of tools that take a reserved name or a lookalike of one (PROTOCOL 6.2: the built-in
 * tools' names; and the worker SDKs' own tools, which a bus tool would sit beside), and of every
 * `sdkTools` entry: the worker's own tools come from the built-in contexts a request names, never
 * from a registered one, which would hand them to every session whose grant names it.
 */
export function reservedNames(spec: ToolContextSpec, prefix = ''): Violation[] {
  const violations: Violation[] = [];
  for (const [i, tool] of (spec.matrixTools ?? []).entries()) {
    const reserved = reservedLookalike(tool.name);
    if (reserved === undefined) continue;
    const what = BUILTIN_TOOL_NAMES.has(reserved) ? 'a built-in tool' : "one of the worker SDKs' own tools";
    const as = reserved === tool.name ? 'the name' : `a lookalike of the name ('${reserved}')`;
    violations.push({
      path: `${prefix}/matrixTools/${i}/name`,
      message: `${tool.name} is ${as} of ${what}: no registered tool may take it`,
      keyword: 'reserved',
    });
  }
  for (const [i, name] of (spec.sdkTools ?? []).entries())
    violations.push({
      path: `${prefix}/sdkTools/${i}`,
      message: `${name}: a registered context may not name the worker's own tools (sdkTools); only a built-in context the request names gives them`,
      keyword: 'reserved',
    });
  return violations;
}

/** What policy forbids in a spec that is otherwise valid: a built-in key, reserved targets, reserved tool names. */
export function forbiddenParts(spec: ToolContextSpec, prefix = ''): Violation[] {
  const found = [...reservedTargets(spec, prefix), ...reservedNames(spec, prefix)];
  if (BUILTIN_KEYS.has(spec.key))
    found.unshift({ path: `${prefix}/key`, message: `${spec.key} is a built-in context's key`, keyword: 'builtin' });
  return found;
}

const BUILTIN_KEYS: ReadonlySet<string> = new Set(builtinContexts.map((c) => c.key));

/** How a spec is checked; `$register` uses the defaults but for `maxPayload`. */
export interface RegistrationCheck {
  /** Prefix of violation paths; default `/spec` (the `$register` body). */
  prefix?: string;
  /** The server's `max_payload`: every resolution of the context must fit in it; unchecked when absent. */
  maxPayload?: number;
  /** Compile each input schema (default true); the meta-schema is checked either way. */
  compile?: boolean;
  /** Bytes of the spec as stored, when known: lets the size check skip contexts far too small to matter. */
  storedBytes?: number;
}

/**
 * Why a spec cannot be registered, or undefined when it can: `BadRequestError` with every
 * violation, `ForbiddenError` for what policy forbids, `PayloadTooLargeError` for a context
 * whose resolution would not fit in a reply. The same checks serve `$register` and a context
 * read back from the KV bucket (PROTOCOL 7).
 */
export function registrationError(spec: unknown, check: RegistrationCheck = {}): MatrixError | undefined {
  const prefix = check.prefix ?? '/spec';
  return errorOf(spec, check, prefix, specViolations(spec, prefix, check.compile === false ? null : undefined));
}

function errorOf(
  spec: unknown,
  check: RegistrationCheck,
  prefix: string,
  violations: Violation[],
): MatrixError | undefined {
  if (violations.length > 0) {
    return new BadRequestError(`invalid tool context spec: ${describeViolations(violations)}`, {
      details: violationDetails(violations),
    });
  }
  const valid = spec as ToolContextSpec;
  const forbidden = forbiddenParts(valid, prefix);
  if (forbidden.length > 0) {
    return new ForbiddenError(
      `tool context ${valid.key} may not be registered: ${forbidden.map((v) => `${v.path} ${v.message}`).join('; ')}`,
      {
        details: { violations: forbidden },
      },
    );
  }
  if (check.maxPayload === undefined) return undefined;
  const overflow = resolutionOverflow(valid, check.maxPayload, check.storedBytes);
  if (overflow === undefined) return undefined;
  return new PayloadTooLargeError(
    `tool context ${valid.key} is too large to deliver: its $resolve reply in format ${overflow.format}${overflow.strict ? ' (strict)' : ''} as ${overflow.encoding} would be ${overflow.bytes} bytes, over the server's max_payload of ${check.maxPayload}; shorten its descriptions, schemas or instructions, or split it into several contexts`,
  );
}

/** Throws the error `registrationError` finds. */
export function assertRegistrable(spec: unknown, check: RegistrationCheck = {}): asserts spec is ToolContextSpec {
  const error = registrationError(spec, check);
  if (error !== undefined) throw error;
}
