/**
 * The four contexts that ship with the registry, and the rules that pick them for a
 * profile when it names no refs. Targets and ops of the built-in tools (docs/concepts.md lists them):
 *
 * | tool | target | op |
 * |---|---|---|
 * | matrix_introspect | system.agents | $introspect |
 * | session_state_read | system.sessions | $read |
 * | matrix_invoke | system.dispatcher | $invoke (the dispatcher forwards it to `args.target`/`args.op`) |
 * | trace_query | system.traces | $query |
 * | package_validate | system.packages | $validate |
 */
import { TRACE_ID } from '../bus/headers.js';
import { Mounts } from '../bus/subjects.js';
import { MCP_SEARCH_TOOL_NAME } from './search/mcp-view.js';
import { SEARCH_TOOL_NAME } from './search/search-tool.js';
import type { MatrixToolProjection, ToolContextSpec } from './types.js';

/** Keys of the built-in contexts. */
export const BuiltinKey = {
  ActorReadonly: 'actor-readonly',
  ActorEdit: 'actor-edit',
  RepoCoding: 'repo-coding',
  TestRunner: 'test-runner',
} as const;
export type BuiltinKey = (typeof BuiltinKey)[keyof typeof BuiltinKey];

/** The name of the meta-tool that forwards to any allowed mount op (PROTOCOL 6.2). */
export const MATRIX_INVOKE = 'matrix_invoke';

const matrixIntrospect: MatrixToolProjection = {
  name: 'matrix_introspect',
  description:
    'Describe the live mounts on the bus: each mount, its ops and their request schemas. Give `mount` to describe one mount only.',
  inputSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      mount: {
        type: 'string',
        description: 'A mount name such as system.tools; omit for all mounts.',
        pattern: '^[a-z0-9_-]+(\\.[a-z0-9_-]+)*$',
      },
    },
  },
  target: Mounts.Agents,
  op: '$introspect',
  resultMode: 'json',
  timeoutMs: 5_000,
  annotations: { readOnly: true, idempotent: true, openWorld: false },
};

const sessionStateRead: MatrixToolProjection = {
  name: 'session_state_read',
  description:
    'Read the state of a session: its keys and values. Defaults to the calling session; give `keys` to read only some.',
  inputSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      session: {
        type: 'string',
        minLength: 1,
        maxLength: 256,
        description: 'Session id; default: the calling session.',
      },
      keys: {
        type: 'array',
        maxItems: 100,
        items: { type: 'string', minLength: 1, maxLength: 256 },
        description: 'Only these keys.',
      },
    },
  },
  target: Mounts.Sessions,
  op: '$read',
  resultMode: 'json',
  annotations: { readOnly: true, idempotent: true, openWorld: false },
};

const matrixInvoke: MatrixToolProjection = {
  name: MATRIX_INVOKE,
  description:
    'Call an op on a mount (for example target "app.notes", op "$update"). Every call waits for a person to approve it. Reserved mounts cannot be called.',
  inputSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['target', 'op'],
    properties: {
      target: { type: 'string', pattern: '^[a-z0-9_-]+(\\.[a-z0-9_-]+)*$', description: 'The mount to call.' },
      op: { type: 'string', pattern: '^\\$[A-Za-z][A-Za-z0-9_]*$', description: 'The op, starting with $.' },
      args: { type: 'object', description: "The op's request body." },
    },
  },
  target: Mounts.Dispatcher,
  op: '$invoke',
  resultMode: 'json',
  annotations: { readOnly: false, destructive: true, idempotent: false, openWorld: false },
};

const traceQuery: MatrixToolProjection = {
  name: 'trace_query',
  description:
    'Find tool calls made through the dispatcher, by trace id, tool, session, principal, outcome or time; newest first, a page at a time.',
  inputSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      traceId: { type: 'string', pattern: TRACE_ID.source, description: 'W3C trace id (32 hex digits).' },
      tool: { type: 'string', pattern: '^[a-zA-Z0-9_-]{1,64}$', description: 'Tool name.' },
      session: { type: 'string', maxLength: 256, description: 'Only calls of this session.' },
      principal: { type: 'string', maxLength: 256, description: 'Only calls made for this principal.' },
      outcome: { enum: ['ok', 'error'], description: 'Only calls that succeeded, or failed.' },
      since: { type: 'string', maxLength: 64, description: 'ISO 8601 time; calls at or after it.' },
      until: { type: 'string', maxLength: 64, description: 'ISO 8601 time; calls before it.' },
      limit: { type: 'integer', minimum: 1, maximum: 500, description: 'At most this many; default 50.' },
      cursor: { type: 'string', maxLength: 64, description: 'The `next` of a previous answer, for older calls.' },
    },
  },
  target: Mounts.Traces,
  op: '$query',
  resultMode: 'summary',
  timeoutMs: 10_000,
  annotations: { readOnly: true, idempotent: true, openWorld: false },
};

const packageValidate: MatrixToolProjection = {
  name: 'package_validate',
  description:
    'Validate tool context specs (ToolContextSpec) against the contracts; lists every violation with its path.',
  inputSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      spec: { type: 'object', description: 'One ToolContextSpec.' },
      specs: { type: 'array', maxItems: 1000, items: { type: 'object' }, description: 'Several ToolContextSpecs.' },
    },
  },
  target: Mounts.Packages,
  op: '$validate',
  resultMode: 'json',
  annotations: { readOnly: true, idempotent: true, openWorld: false },
};

/**
 * The tools a coding worker's own SDK gives the model (its files and its shell), which
 * `repo-coding` passes through: they run in the worker, never over the bus.
 */
export const WORKER_SDK_TOOLS = [
  'read_file',
  'write_file',
  'edit_file',
  'list_files',
  'search_files',
  'run_shell',
] as const;

/** The built-in contexts, by key order. */
export const builtinContexts: readonly ToolContextSpec[] = [
  {
    key: BuiltinKey.ActorEdit,
    title: 'Actor editing',
    description: 'Change the system by calling ops on mounts, each call approved by a person.',
    instructions:
      'Use matrix_invoke only for changes you were asked to make. Each call waits for approval: say what the call will change and why before you make it. If a call is rejected, do not retry it unchanged.',
    matrixTools: [matrixInvoke],
    permissions: { approval: { tools: [MATRIX_INVOKE] }, allowTargets: ['>'] },
    timeoutMs: 30_000,
    provides: ['actor.edit'],
  },
  {
    key: BuiltinKey.ActorReadonly,
    title: 'Actor inspection',
    description: 'Look at the live system: mounts, their ops, and session state. Changes nothing.',
    instructions:
      'Use matrix_introspect to learn which mounts and ops exist before you reason about them, and session_state_read to read what this session knows. These tools change nothing.',
    matrixTools: [matrixIntrospect, sessionStateRead],
    permissions: { approval: 'never' },
    timeoutMs: 15_000,
    provides: ['actor.read'],
  },
  {
    key: BuiltinKey.RepoCoding,
    title: 'Repository coding',
    description:
      "Work in a code repository with the worker's own file and shell tools, plus traces and package validation.",
    instructions:
      'Read before you edit; keep changes small. Validate any tool context spec you write with package_validate. Use trace_query to see what earlier tool calls did. Run the verification commands before you say you are done.',
    matrixTools: [traceQuery, packageValidate],
    sdkTools: [...WORKER_SDK_TOOLS],
    permissions: { approval: 'never' },
    environmentRequirements: { repoRoot: true },
    verification: { checks: ['tests-pass', 'package_validate'] },
    timeoutMs: 60_000,
    provides: ['repo.code'],
  },
  {
    key: BuiltinKey.TestRunner,
    title: 'Test running',
    description: 'Evaluate work by its tests and by the traces of the tool calls it made.',
    instructions:
      'Judge by evidence: run the tests, read the traces with trace_query, and report what passed and what failed with the output that shows it.',
    matrixTools: [traceQuery],
    permissions: { approval: 'never' },
    verification: { checks: ['tests-pass'] },
    timeoutMs: 120_000,
    provides: ['test.run'],
  },
];

/**
 * Names of the built-in tools, of the search tool `$resolve` adds past a defer threshold and of
 * the one the MCP bridge lists past its threshold (PROTOCOL 13): reserved, no registered context
 * may define one (PROTOCOL 6.2).
 */
export const BUILTIN_TOOL_NAMES: ReadonlySet<string> = new Set([
  ...builtinContexts.flatMap((c) => (c.matrixTools ?? []).map((t) => t.name)),
  SEARCH_TOOL_NAME,
  MCP_SEARCH_TOOL_NAME,
]);

/**
 * The tools the coding workers' own SDKs give the model under their own names (Claude Code's and
 * Codex's), beside repo-coding's generic ones: a bus tool of such a name would sit beside the
 * worker's, and the model could not tell which it calls.
 */
export const WORKER_OWN_TOOL_NAMES = [
  'Bash',
  'BashOutput',
  'KillBash',
  'Read',
  'Write',
  'Edit',
  'MultiEdit',
  'Glob',
  'Grep',
  'LS',
  'NotebookEdit',
  'WebFetch',
  'WebSearch',
  'TodoWrite',
  'Task',
  'shell',
  'local_shell',
  'apply_patch',
  'exec_command',
  'write_stdin',
  'update_plan',
  'view_image',
] as const;

/**
 * A tool name as a model might confuse it: case folded, `-` and `_` dropped, and the letters and
 * digits that read alike in a tool name's alphabet taken as one (`l`, `I`, `1` as `i`; `0` as
 * `o`): `MATRIX_INVOKE`, `matrix-invoke`, `matrixInvoke` and `matrix_lnvoke` are all `matrixinvoke`.
 */
export function foldToolName(name: string): string {
  return name.toLowerCase().replace(/[-_]/g, '').replace(/[l1]/g, 'i').replace(/0/g, 'o');
}

/** The reserved names (the built-in tools', the worker SDKs'), by their folded form. */
const RESERVED_BY_FOLD: ReadonlyMap<string, string> = new Map(
  [...BUILTIN_TOOL_NAMES, ...WORKER_SDK_TOOLS, ...WORKER_OWN_TOOL_NAMES].map((name) => [foldToolName(name), name]),
);

/**
 * The reserved name that `name` is or looks like (a built-in tool's, or one of the worker SDK's
 * tools), if any: no registered context may take it, as a bus tool or as an SDK tool.
 */
export function reservedLookalike(name: string): string | undefined {
  return RESERVED_BY_FOLD.get(foldToolName(name));
}

/** The workers for which `propose` gets `repo-coding`. */
const codingWorkers: ReadonlySet<string> = new Set(['claude-code', 'codex']);

/**
 * The built-in selection rule: the context keys for a profile that names no refs, or an
 * empty list when no rule applies (least privilege: an unknown profile gets no tools).
 */
export function builtinRefsFor(profile: string, worker: string | undefined): string[] {
  switch (profile) {
    case 'default':
    case 'explain':
    case 'monitor':
      return [BuiltinKey.ActorReadonly];
    case 'edit':
      return [BuiltinKey.ActorEdit];
    case 'propose':
      return worker !== undefined && codingWorkers.has(worker) ? [BuiltinKey.RepoCoding] : [];
    case 'evaluate':
      return [BuiltinKey.TestRunner];
    default:
      return [];
  }
}
