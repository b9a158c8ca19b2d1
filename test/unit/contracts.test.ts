/**
 * Types and schemas never drift: for every wire shape, a literal that TypeScript checks
 * against the type (every key, each marked required or optional exactly as the type has
 * it) is compared here with the schema's `properties` and `required`.
 */
import { describe, expect, it } from 'vitest';
import type {
  AnswerReply,
  AnswerRequest,
  ApprovalEvent,
  ApprovalRequest,
  PendingApproval,
  PendingReply,
  PendingRequest,
} from '../../src/approvals/types.js';
import type { Progress } from '../../src/bus/context.js';
import { contracts, SchemaId } from '../../src/bus/contracts.js';
import type { ErrorBody } from '../../src/bus/errors.js';
import { builtinContexts } from '../../src/registry/builtins.js';
import type {
  IntrospectReply,
  ListedContext,
  ListReply,
  ListRequest,
  MatrixToolProjection,
  ResolvedTool,
  ResolvedToolContext,
  ResolveRequest,
  SearchedTool,
  SearchReply,
  SearchRequest,
  SkillRef,
  ToolAnnotations,
  ToolContextSpec,
} from '../../src/registry/types.js';
import type { Task, TaskListReply, TaskListRequest, TaskResultRequest } from '../../src/tasks/types.js';

type Presence<T> = { [K in keyof T]-?: object extends Pick<T, K> ? 'optional' : 'required' };

const shapes = {
  toolContextSpec: {
    key: 'required',
    title: 'required',
    description: 'required',
    instructions: 'optional',
    matrixTools: 'optional',
    sdkTools: 'optional',
    permissions: 'required',
    environmentRequirements: 'optional',
    verification: 'optional',
    timeoutMs: 'optional',
    provides: 'optional',
    requires: 'optional',
  } satisfies Presence<ToolContextSpec>,
  projection: {
    name: 'required',
    description: 'required',
    inputSchema: 'required',
    target: 'required',
    op: 'required',
    resultMode: 'optional',
    timeoutMs: 'optional',
    outputSchema: 'optional',
    annotations: 'optional',
    encoding: 'optional',
    execution: 'optional',
  } satisfies Presence<MatrixToolProjection>,
  annotations: {
    readOnly: 'optional',
    destructive: 'optional',
    idempotent: 'optional',
    openWorld: 'optional',
  } satisfies Presence<ToolAnnotations>,
  listRequest: {
    cursor: 'optional',
    limit: 'optional',
    keys: 'optional',
    tool: 'optional',
  } satisfies Presence<ListRequest>,
  listReply: { contexts: 'required', nextCursor: 'optional', revision: 'required' } satisfies Presence<ListReply>,
  listed: {
    key: 'required',
    title: 'required',
    description: 'required',
    tools: 'required',
    source: 'required',
    revision: 'required',
    provides: 'optional',
    requires: 'optional',
  } satisfies Presence<ListedContext>,
  resolveRequest: {
    profile: 'required',
    toolContextRefs: 'optional',
    worker: 'optional',
    skills: 'optional',
    requires: 'optional',
    environment: 'optional',
    format: 'optional',
    strict: 'optional',
    onlyAvailable: 'optional',
    defer: 'optional',
  } satisfies Presence<ResolveRequest>,
  searchRequest: { session: 'required', query: 'required', limit: 'optional' } satisfies Presence<SearchRequest>,
  searchReply: { tools: 'required', total: 'required', providerResult: 'optional' } satisfies Presence<SearchReply>,
  searchedTool: {
    name: 'required',
    description: 'required',
    context: 'required',
    score: 'required',
  } satisfies Presence<SearchedTool>,
  skill: { name: 'required', toolContextRefs: 'optional', requires: 'optional' } satisfies Presence<SkillRef>,
  resolved: {
    contexts: 'required',
    matrixTools: 'required',
    sdkTools: 'required',
    instructions: 'required',
    timeoutMs: 'required',
    environmentRequirements: 'required',
    verification: 'required',
    diagnostics: 'required',
    providerTools: 'optional',
    revision: 'required',
    digest: 'required',
  } satisfies Presence<ResolvedToolContext>,
  resolvedTool: {
    name: 'required',
    description: 'required',
    inputSchema: 'required',
    target: 'required',
    op: 'required',
    resultMode: 'required',
    timeoutMs: 'optional',
    outputSchema: 'optional',
    annotations: 'optional',
    encoding: 'optional',
    execution: 'optional',
    requiresApproval: 'required',
    context: 'required',
    allowTargets: 'optional',
  } satisfies Presence<ResolvedTool>,
  introspect: {
    mount: 'required',
    version: 'required',
    ops: 'required',
    revision: 'optional',
    contexts: 'optional',
    tools: 'optional',
    diagnostics: 'optional',
    natsServer: 'optional',
    instance: 'required',
  } satisfies Presence<IntrospectReply>,
  task: {
    taskId: 'required',
    callId: 'required',
    name: 'required',
    status: 'required',
    statusMessage: 'optional',
    progress: 'optional',
    createdAt: 'required',
    lastUpdatedAt: 'required',
    ttlMs: 'required',
    pollIntervalMs: 'required',
  } satisfies Presence<Task>,
  taskResult: { taskId: 'required', waitMs: 'optional' } satisfies Presence<TaskResultRequest>,
  taskList: { cursor: 'optional', status: 'optional', limit: 'optional' } satisfies Presence<TaskListRequest>,
  taskListReply: { tasks: 'required', nextCursor: 'optional' } satisfies Presence<TaskListReply>,
  progress: { progress: 'required', total: 'optional', message: 'optional' } satisfies Presence<Progress>,
  approvalRequest: {
    callId: 'required',
    tool: 'required',
    target: 'required',
    op: 'required',
    arguments: 'required',
    session: 'optional',
    principal: 'optional',
    deadline: 'optional',
  } satisfies Presence<ApprovalRequest>,
  pendingApproval: {
    approvalId: 'required',
    callId: 'required',
    tool: 'required',
    target: 'required',
    op: 'required',
    arguments: 'required',
    truncated: 'optional',
    argumentsDigest: 'required',
    argumentsBytes: 'required',
    session: 'optional',
    principal: 'optional',
    requestedAt: 'required',
    expiresAt: 'required',
  } satisfies Presence<PendingApproval>,
  pendingRequest: { cursor: 'optional', limit: 'optional', approvalId: 'optional' } satisfies Presence<PendingRequest>,
  pendingReply: { approvals: 'required', nextCursor: 'optional' } satisfies Presence<PendingReply>,
  answerRequest: { approvalId: 'required', decision: 'required', reason: 'optional' } satisfies Presence<AnswerRequest>,
  answerReply: {
    approvalId: 'required',
    decision: 'required',
    by: 'required',
    decidedAt: 'required',
  } satisfies Presence<AnswerReply>,
  approvalEvent: {
    approvalId: 'required',
    callId: 'required',
    tool: 'required',
    target: 'required',
    op: 'required',
    session: 'optional',
    principal: 'optional',
    expiresAt: 'required',
    decision: 'optional',
    by: 'optional',
    reason: 'optional',
    expired: 'optional',
  } satisfies Presence<ApprovalEvent>,
  errorBody: { error: 'required' } satisfies Presence<ErrorBody>,
  errorInner: { code: 'required', message: 'required', details: 'optional' } satisfies Presence<ErrorBody['error']>,
};

const c = contracts();
const at = (id: string, ...path: string[]): Record<string, unknown> => {
  let node: unknown = c.schema(id);
  for (const step of path) {
    node = (node as Record<string, unknown>)[step];
    const ref = (node as { $ref?: string } | undefined)?.$ref;
    if (ref !== undefined && !ref.startsWith('#')) node = c.schema(new URL(ref, id).href);
  }
  return node as Record<string, unknown>;
};

function presenceOf(schema: Record<string, unknown>): Record<string, string> {
  const required = new Set((schema.required as string[] | undefined) ?? []);
  return Object.fromEntries(
    Object.keys(schema.properties as object).map((k) => [k, required.has(k) ? 'required' : 'optional']),
  );
}

describe('the TypeScript types against contracts/', () => {
  it.each([
    ['ToolContextSpec', shapes.toolContextSpec, () => at(SchemaId.ToolContextSpec)],
    ['MatrixToolProjection', shapes.projection, () => at(SchemaId.MatrixToolProjection)],
    ['ToolAnnotations', shapes.annotations, () => at(SchemaId.MatrixToolProjection, 'properties', 'annotations')],
    ['ListRequest', shapes.listRequest, () => at(SchemaId.ListRequest)],
    ['ListReply', shapes.listReply, () => at(SchemaId.ListReply)],
    ['ListedContext', shapes.listed, () => at(SchemaId.ListReply, 'properties', 'contexts', 'items')],
    ['ResolveRequest', shapes.resolveRequest, () => at(SchemaId.ResolveRequest)],
    ['SkillRef', shapes.skill, () => at(SchemaId.ResolveRequest, 'properties', 'skills', 'items')],
    ['SearchRequest', shapes.searchRequest, () => at(SchemaId.SearchRequest)],
    ['SearchReply', shapes.searchReply, () => at(SchemaId.SearchReply)],
    ['SearchedTool', shapes.searchedTool, () => at(SchemaId.SearchReply, 'properties', 'tools', 'items')],
    ['ResolvedToolContext', shapes.resolved, () => at(SchemaId.ResolveReply)],
    ['ResolvedTool', shapes.resolvedTool, () => at(SchemaId.ResolveReply, 'properties', 'matrixTools', 'items')],
    ['IntrospectReply', shapes.introspect, () => at(SchemaId.IntrospectReply)],
    ['Task', shapes.task, () => at(SchemaId.Task)],
    ['TaskResultRequest', shapes.taskResult, () => at(SchemaId.TaskResultRequest)],
    ['TaskListRequest', shapes.taskList, () => at(SchemaId.TaskListRequest)],
    ['TaskListReply', shapes.taskListReply, () => at(SchemaId.TaskListReply)],
    ['Progress', shapes.progress, () => at(SchemaId.Progress)],
    ['ApprovalRequest', shapes.approvalRequest, () => at(SchemaId.ApprovalRequest)],
    [
      'PendingApproval',
      shapes.pendingApproval,
      () => at(SchemaId.ApprovalsPendingReply, 'properties', 'approvals', 'items'),
    ],
    ['PendingRequest', shapes.pendingRequest, () => at(SchemaId.ApprovalsPendingRequest)],
    ['PendingReply', shapes.pendingReply, () => at(SchemaId.ApprovalsPendingReply)],
    ['AnswerRequest', shapes.answerRequest, () => at(SchemaId.ApprovalsAnswerRequest)],
    ['AnswerReply', shapes.answerReply, () => at(SchemaId.ApprovalsAnswerReply)],
    ['ApprovalEvent', shapes.approvalEvent, () => at(SchemaId.ApprovalEvent)],
    ['ErrorBody', shapes.errorBody, () => at(SchemaId.Error)],
    ['ErrorBody.error', shapes.errorInner, () => at(SchemaId.Error, 'properties', 'error')],
  ])('%s has the same fields, equally required', (_name, shape, schema) => {
    expect(presenceOf(schema())).toEqual(shape);
  });

  it('compiles every schema in contracts/ with a $id', () => {
    for (const id of Object.values(SchemaId)) expect(() => c.check(id)).not.toThrow();
  });

  it('accepts every built-in context as a ToolContextSpec', () => {
    for (const spec of builtinContexts) expect(c.check(SchemaId.ToolContextSpec)(spec)).toBeUndefined();
  });

  it('compiles every built-in tool input schema', () => {
    for (const spec of builtinContexts) {
      for (const tool of spec.matrixTools ?? []) expect(() => c.compile(tool.inputSchema)).not.toThrow();
    }
  });
});

describe('the built-in tools against the reference mounts they target', () => {
  it.each([
    ['matrix_introspect', SchemaId.AgentsIntrospectRequest],
    ['session_state_read', SchemaId.SessionReadRequest],
    ['trace_query', SchemaId.TraceQueryRequest],
    ['package_validate', SchemaId.PackageValidateRequest],
  ])('%s takes exactly the fields of its target op', (name, id) => {
    const tool = builtinContexts.flatMap((ctx) => ctx.matrixTools ?? []).find((t) => t.name === name);
    expect(Object.keys((tool?.inputSchema.properties as object) ?? {}).sort()).toEqual(
      Object.keys(at(id).properties as object).sort(),
    );
  });
});

describe('a violation', () => {
  it('names each field with its JSON Pointer and says what is wrong', () => {
    const violations = c.check(SchemaId.ResolveRequest)({ toolContextRefs: ['UPPER', 3], extra: 1, format: 'xml' });
    expect(violations).toEqual(
      expect.arrayContaining([
        { path: '/profile', message: 'is required', keyword: 'required' },
        expect.objectContaining({
          path: '/extra',
          message: expect.stringMatching(/^is not a known field \(known fields: profile, /),
        }),
        expect.objectContaining({ path: '/toolContextRefs/0', keyword: 'pattern' }),
        expect.objectContaining({ path: '/toolContextRefs/1', message: 'must be string' }),
        { path: '/format', message: 'must be one of "matrix", "openai", "anthropic", "mcp"', keyword: 'enum' },
      ]),
    );
  });
});

describe('the approval shapes on the wire', () => {
  const reply = c.check(SchemaId.ApprovalReply);

  it('takes a decision at once, or a pending approval with its id and expiry, and nothing between', () => {
    expect(reply({ decision: 'approve', by: 'policy' })).toBeUndefined();
    expect(reply({ decision: 'reject', reason: 'no' })).toBeUndefined();
    expect(
      reply({
        decision: 'pending',
        approvalId: 'abcdefabcdefabcdef00-000000000000',
        expiresAt: '2026-12-01T00:00:00Z',
      }),
    ).toBeUndefined();
    expect(reply({ decision: 'pending' })).toBeDefined();
    expect(reply({ decision: 'approve', approvalId: 'abcdefabcdefabcdef00-000000000000' })).toBeDefined();
  });

  it('refuses an answer that is not exactly approve or reject', () => {
    const answer = c.check(SchemaId.ApprovalsAnswerRequest);
    const id = 'abcdefabcdefabcdef00-000000000000';
    expect(answer({ approvalId: id, decision: 'approve' })).toBeUndefined();
    for (const decision of ['Approve', 'yes', 'approve ', 'pending', true, 1])
      expect(answer({ approvalId: id, decision }), String(decision)).toBeDefined();
    expect(answer({ approvalId: 'x', decision: 'approve' })?.[0]?.path).toBe('/approvalId');
  });
});
