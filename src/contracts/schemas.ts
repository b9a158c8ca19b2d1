/**
 * The JSON Schemas of `contracts/`, compiled once by one ajv instance, and the translation
 * of ajv's errors into the protocol's violations (a JSON Pointer and a sentence each).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import type { Violation } from '../bus/errors.js';

const base = 'https://matrix.invalid/contracts/v1/';

/** The `$id` of every schema in `contracts/`. */
export const SchemaId = {
  Common: `${base}common.json`,
  Error: `${base}error.json`,
  ToolContextSpec: `${base}tool-context-spec.json`,
  MatrixToolProjection: `${base}matrix-tool-projection.json`,
  ListRequest: `${base}list.request.json`,
  ListReply: `${base}list.reply.json`,
  ResolveRequest: `${base}resolve.request.json`,
  ResolveReply: `${base}resolve.reply.json`,
  IntrospectRequest: `${base}introspect.request.json`,
  IntrospectReply: `${base}introspect.reply.json`,
  CallRequest: `${base}call.request.json`,
  ToolResult: `${base}tool-result.json`,
  ApprovalRequest: `${base}approval.request.json`,
  ApprovalReply: `${base}approval.reply.json`,
  CallEvents: `${base}call.event.json`,
  RegisterRequest: `${base}register.request.json`,
  UnregisterRequest: `${base}unregister.request.json`,
  RegisterReply: `${base}register.reply.json`,
  ChangedEvent: `${base}changed.event.json`,
  AgentsIntrospectRequest: `${base}agents.introspect.request.json`,
  AgentsIntrospectReply: `${base}agents.introspect.reply.json`,
  SessionReadRequest: `${base}sessions.read.request.json`,
  SessionReadReply: `${base}sessions.read.reply.json`,
  SessionWriteRequest: `${base}sessions.write.request.json`,
  SessionWriteReply: `${base}sessions.write.reply.json`,
  TraceQueryRequest: `${base}traces.query.request.json`,
  TraceQueryReply: `${base}traces.query.reply.json`,
  PackageValidateRequest: `${base}packages.validate.request.json`,
  PackageValidateReply: `${base}packages.validate.reply.json`,
  ApprovalPolicy: `${base}approval-policy.json`,
  CallReply: `${base}call.reply.json`,
  Task: `${base}task.json`,
  TaskRef: `${base}tasks.get.request.json`,
  TaskResultRequest: `${base}tasks.result.request.json`,
  TaskListRequest: `${base}tasks.list.request.json`,
  TaskListReply: `${base}tasks.list.reply.json`,
} as const;
export type SchemaId = (typeof SchemaId)[keyof typeof SchemaId];

/** The `contracts/` folder, found from this file whether it runs from `src/` or `dist/src/`. */
export function contractsDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const candidate = join(dir, 'contracts');
    if (existsSync(join(candidate, 'common.json'))) return candidate;
    dir = dirname(dir);
  }
  throw new Error('contracts/ not found beside the package');
}

/** Every schema in `contracts/`, parsed. */
export function loadContracts(dir = contractsDir()): Array<Record<string, unknown>> {
  return readdirSync(dir)
    .filter((file) => file.endsWith('.json'))
    .sort()
    .map((file) => JSON.parse(readFileSync(join(dir, file), 'utf8')) as Record<string, unknown>);
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

/** A validator compiled once: `undefined` when valid, else every violation. */
export type Check = (value: unknown) => Violation[] | undefined;

/**
 * The contracts, compiled by one strict ajv instance. Validators are compiled on first use
 * and cached, so no request ever compiles a schema.
 */
export class Contracts {
  readonly ajv: Ajv2020;
  private readonly checks = new Map<string, Check>();
  private readonly inline = new WeakMap<object, Check>();

  constructor(schemas: Array<Record<string, unknown>> = loadContracts()) {
    this.ajv = new Ajv2020({ allErrors: true, strict: true, verbose: true, allowUnionTypes: true });
    for (const schema of schemas) this.ajv.addSchema(schema);
  }

  /** The raw schema of an `$id`. */
  schema(id: string): Record<string, unknown> {
    const s = this.ajv.getSchema(id)?.schema;
    if (s === undefined || typeof s !== 'object') throw new Error(`no schema ${id} in contracts/`);
    return s as Record<string, unknown>;
  }

  /** The check for an inline schema (a service's own op), compiled once per schema object. */
  compile(schema: Record<string, unknown>): Check {
    let check = this.inline.get(schema);
    if (check === undefined) {
      const validate = this.ajv.compile(schema);
      check = (value) => (validate(value) ? undefined : violationsOf(validate.errors));
      this.inline.set(schema, check);
    }
    return check;
  }

  /** The check for an `$id`, compiled once. */
  check(id: string): Check {
    let check = this.checks.get(id);
    if (check === undefined) {
      const validate: ValidateFunction | undefined = this.ajv.getSchema(id);
      if (validate === undefined) throw new Error(`no schema ${id} in contracts/`);
      check = (value) => (validate(value) ? undefined : violationsOf(validate.errors));
      this.checks.set(id, check);
    }
    return check;
  }
}

let shared: Contracts | undefined;

/** The process-wide contracts, loaded on first use. */
export function contracts(): Contracts {
  return (shared ??= new Contracts());
}
