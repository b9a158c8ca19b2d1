/**
 * The JSON Schemas of `contracts/` by `$id`, compiled once by the strict compiler of `schema-compiler.ts`.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Check, Dialect, SchemaCompiler } from './schema-compiler.js';

export { type Check, violationsOf } from './schema-compiler.js';

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
  SearchRequest: `${base}search.request.json`,
  SearchReply: `${base}search.reply.json`,
  IntrospectRequest: `${base}introspect.request.json`,
  IntrospectReply: `${base}introspect.reply.json`,
  CallRequest: `${base}call.request.json`,
  ToolResult: `${base}tool-result.json`,
  ApprovalRequest: `${base}approval.request.json`,
  ApprovalReply: `${base}approval.reply.json`,
  ApprovalsPendingRequest: `${base}approvals.pending.request.json`,
  ApprovalsPendingReply: `${base}approvals.pending.reply.json`,
  ApprovalsAnswerRequest: `${base}approvals.answer.request.json`,
  ApprovalsAnswerReply: `${base}approvals.answer.reply.json`,
  ApprovalEvent: `${base}approvals.event.json`,
  CallEvents: `${base}call.event.json`,
  RegisterRequest: `${base}register.request.json`,
  UnregisterRequest: `${base}unregister.request.json`,
  RevokeRequest: `${base}revoke.request.json`,
  RevokeReply: `${base}revoke.reply.json`,
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
  OidcMapping: `${base}oidc-mapping.json`,
  CallReply: `${base}call.reply.json`,
  Task: `${base}task.json`,
  TaskRef: `${base}tasks.get.request.json`,
  TaskResultRequest: `${base}tasks.result.request.json`,
  TaskListRequest: `${base}tasks.list.request.json`,
  TaskListReply: `${base}tasks.list.reply.json`,
  CancelRequest: `${base}cancel.request.json`,
  CancelReply: `${base}cancel.reply.json`,
  Progress: `${base}progress.json`,
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

/**
 * The contracts, compiled by one strict compiler (`schema-compiler.ts`). Validators are compiled on
 * first use and cached, so no request ever compiles a schema.
 */
export class Contracts {
  private readonly compiler: SchemaCompiler;

  constructor(schemas: Array<Record<string, unknown>> = loadContracts()) {
    this.compiler = new SchemaCompiler(Dialect.Contracts, schemas);
  }

  /** The raw schema of an `$id`. */
  schema(id: string): Record<string, unknown> {
    return this.compiler.schema(id);
  }

  /** The check for an inline schema (a service's own op), compiled once per schema object. */
  compile(schema: Record<string, unknown>): Check {
    return this.compiler.check(schema);
  }

  /** The check for an `$id`, compiled once. */
  check(id: string): Check {
    return this.compiler.checkId(id);
  }
}

let shared: Contracts | undefined;

/** The process-wide contracts, loaded on first use. */
export function contracts(): Contracts {
  return (shared ??= new Contracts());
}
