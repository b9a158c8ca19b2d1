/**
 * What `$register` checks beyond the schema: tool names unique within the context, input
 * schemas that compile, approval names that exist, and no target on a reserved subject.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import { BadRequestError, ForbiddenError, type Violation } from '../bus/errors.js';
import { isReservedSubject, opSubject } from '../bus/subjects.js';
import { contracts, SchemaId } from '../contracts/schemas.js';
import type { ToolContextSpec } from './types.js';

// Meta-validation (is this a JSON Schema at all?) on one long-lived instance: it holds one
// compiled meta-schema and compiles nothing per request.
const metaValidator = new Ajv2020({ strict: false, logger: false });

/**
 * A compiler for checking that tool schemas compile. Ajv keeps every function it ever
 * compiled in the instance's code scope, so a long-lived one would grow with every
 * registration: each request gets its own (0.3 ms), collected with it. It skips the
 * meta-schema, which `metaValidator` already checked. Tool schemas come from many authors and
 * drafts, so unknown keywords and formats are allowed.
 */
export function schemaCompiler(): Ajv2020 {
  return new Ajv2020({ strict: false, logger: false, validateFormats: false, validateSchema: false, meta: false });
}

/** Where a tool's input schema breaks the JSON Schema meta-schema (2020-12, whatever its `$schema`). */
function metaViolations(schema: Record<string, unknown>, at: string): Violation[] {
  const { $schema: _ignored, ...rest } = schema;
  if (metaValidator.validateSchema(rest) === true) return [];
  // The meta-schema's anyOf reports one wrong keyword several ways: one violation per path.
  const byPath = new Map<string, Violation>();
  for (const e of metaValidator.errors ?? []) {
    const path = `${at}${e.instancePath}`;
    if (!byPath.has(path)) byPath.set(path, { path, message: `is not valid JSON Schema: ${e.message ?? e.keyword}`, keyword: 'schema' });
  }
  return [...byPath.values()];
}

/** Every violation of a spec, with paths under `prefix`; empty when the spec is valid. */
export function specViolations(spec: unknown, prefix = '', compiler: Ajv2020 = schemaCompiler()): Violation[] {
  const schemaViolations = contracts().check(SchemaId.ToolContextSpec)(spec);
  if (schemaViolations !== undefined) return schemaViolations.map((v) => ({ ...v, path: prefix + v.path }));
  const s = spec as ToolContextSpec;
  const violations: Violation[] = [];
  const firstByName = new Map<string, number>();
  (s.matrixTools ?? []).forEach((tool, i) => {
    const at = `${prefix}/matrixTools/${i}`;
    const first = firstByName.get(tool.name);
    if (first === undefined) firstByName.set(tool.name, i);
    else violations.push({ path: `${at}/name`, message: `repeats the name of ${prefix}/matrixTools/${first}`, keyword: 'uniqueName' });
    const meta = metaViolations(tool.inputSchema, `${at}/inputSchema`);
    violations.push(...meta);
    if (meta.length === 0) {
      try {
        compiler.compile(tool.inputSchema);
      } catch (err) {
        violations.push({ path: `${at}/inputSchema`, message: `is not a JSON Schema that compiles: ${(err as Error).message}`, keyword: 'compile' });
      }
    }
  });
  const approval = s.permissions.approval;
  if (typeof approval === 'object') {
    approval.tools.forEach((name, i) => {
      if (!firstByName.has(name)) {
        violations.push({ path: `${prefix}/permissions/approval/tools/${i}`, message: `names no tool of this context ('${name}')`, keyword: 'knownTool' });
      }
    });
  }
  return violations;
}

/** Paths of tools that target a reserved subject. */
export function reservedTargets(spec: ToolContextSpec, prefix = ''): Violation[] {
  return (spec.matrixTools ?? []).flatMap((tool, i) =>
    isReservedSubject(opSubject(tool.target, tool.op))
      ? [{ path: `${prefix}/matrixTools/${i}/target`, message: `${tool.target} is reserved: no registered tool may target it`, keyword: 'reserved' }]
      : [],
  );
}

/** Throws `BadRequestError` (every violation) or `ForbiddenError` (reserved targets) for a spec that cannot be registered. */
export function assertRegistrable(spec: unknown, prefix = '/spec'): asserts spec is ToolContextSpec {
  const violations = specViolations(spec, prefix);
  if (violations.length > 0) {
    const first = violations
      .slice(0, 3)
      .map((v) => `${v.path} ${v.message}`)
      .join('; ');
    throw new BadRequestError(`invalid tool context spec: ${first}${violations.length > 3 ? ` (and ${violations.length - 3} more)` : ''}`, {
      details: { violations },
    });
  }
  const reserved = reservedTargets(spec as ToolContextSpec, prefix);
  if (reserved.length > 0) {
    throw new ForbiddenError(`tool context ${(spec as ToolContextSpec).key} targets reserved subjects: ${reserved.map((v) => v.path).join(', ')}`, {
      details: { violations: reserved },
    });
  }
}
