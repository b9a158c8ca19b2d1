/**
 * The data shapes of the registry (PROTOCOL section 5). Each mirrors a schema in
 * `contracts/`; `test/contracts.test.ts` holds the two together.
 */
import type { NatsServerReport } from '../identity/nats-server.js';
import type { AnthropicToolReference, OpenAIToolSearchOutput, ProviderTool } from './provider-tools.js';

/** How the dispatcher shapes a tool's reply for the model. */
export const ResultMode = { Json: 'json', Text: 'text', Summary: 'summary' } as const;
export type ResultMode = (typeof ResultMode)[keyof typeof ResultMode];

/** The provider format `$resolve` renders `providerTools` in. */
export const ProviderFormat = { Matrix: 'matrix', OpenAI: 'openai', Anthropic: 'anthropic', Mcp: 'mcp' } as const;
export type ProviderFormat = (typeof ProviderFormat)[keyof typeof ProviderFormat];

/** MCP's tool hints. */
export interface ToolAnnotations {
  /** The tool does not change its environment. */
  readOnly?: boolean;
  /** The tool may destroy or overwrite. */
  destructive?: boolean;
  /** Calling it twice with the same arguments has the effect of calling it once (safe to retry). */
  idempotent?: boolean;
  /** The tool reaches beyond the bus (the web, other systems). */
  openWorld?: boolean;
}

/** Whether a tool's calls may, must or must not run as tasks (MCP's `execution.taskSupport`). */
export const TaskSupport = { Forbidden: 'forbidden', Optional: 'optional', Required: 'required' } as const;
export type TaskSupport = (typeof TaskSupport)[keyof typeof TaskSupport];

/** How a tool runs (MCP's `execution`). */
export interface ToolExecution {
  /** `optional` (default): a call may be a task or not; `required`: only a task; `forbidden`: never a task. */
  taskSupport?: TaskSupport;
}

/** A JSON Schema for a tool's arguments; its `type` is `object`. */
export interface JsonSchemaObject {
  type: 'object';
  [keyword: string]: unknown;
}

/** A tool the LLM sees, projected onto one bus call `<target>.<op>`. */
export interface MatrixToolProjection {
  /** The name the LLM calls, `^[a-zA-Z0-9_-]{1,64}$`. */
  name: string;
  /** What the tool does, for the model. */
  description: string;
  /** JSON Schema of the arguments (type `object`). */
  inputSchema: JsonSchemaObject;
  /** The mount that answers, e.g. `system.agents`. */
  target: string;
  /** The op called on the target, e.g. `$introspect`. */
  op: string;
  /** How the reply is shaped for the model; default `json`. */
  resultMode?: ResultMode;
  /** Longest wait for the target, in ms. */
  timeoutMs?: number;
  /**
   * MCP's `outputSchema`: JSON Schema (type `object`) of the tool's structured result, at most
   * 32 KiB of JSON. In the projections (`$resolve`'s `matrixTools`) and the `mcp` format's tools
   * (OpenAI's and Anthropic's have no field for it); the MCP bridge sends such a tool's own
   * structured result as `structuredContent`. The dispatcher does not check results against it.
   */
  outputSchema?: JsonSchemaObject;
  /** MCP's hints; `idempotent` allows the dispatcher to retry. */
  annotations?: ToolAnnotations;
  /**
   * How the target reads its requests: `msgpack` (default), or `json` for a mount that reads only
   * JSON (PROTOCOL section 2).
   */
  encoding?: 'msgpack' | 'json';
  /** Whether its calls run as tasks (PROTOCOL 9); default `{taskSupport: 'optional'}`. */
  execution?: ToolExecution;
}

/** Which of a context's tools need a person's approval before each call. */
export type ApprovalPolicy = 'never' | 'always' | { tools: string[] };

/** What a context permits. */
export interface ToolPermissions {
  /** Which tools are gated by `system.approvals`. */
  approval: ApprovalPolicy;
  /** NATS subject patterns that `matrix_invoke`-like tools may reach (reserved subjects never). */
  allowTargets?: string[];
}

/** What a context needs of the worker's environment; each `true` means "must be present". */
export interface EnvironmentRequirements {
  cwd?: boolean;
  repoRoot?: boolean;
  container?: boolean;
  /** Credential names that must be available. */
  credentials?: string[];
  /** Environment capabilities that must be available. */
  capabilities?: string[];
}

/** What the worker's environment offers, as `$resolve` is told. */
export interface Environment {
  cwd?: string;
  repoRoot?: string;
  container?: boolean;
  credentials?: string[];
  capabilities?: string[];
}

/** How a worker proves its work. */
export interface Verification {
  /** Shell commands that must succeed. */
  commands?: string[];
  /** Named checks (tools or gates) that must pass. */
  checks?: string[];
}

/** A named group of tools with its instructions, permissions and requirements. */
export interface ToolContextSpec {
  /** Unique key, `^[a-z0-9][a-z0-9_.-]{0,127}$`. */
  key: string;
  /** Title; heads the context's instructions. */
  title: string;
  description: string;
  /** Guidance for the model while these tools are available. */
  instructions?: string;
  /** Tools dispatched over the bus. */
  matrixTools?: MatrixToolProjection[];
  /** Tools the worker's own SDK provides (FS, shell); passed through, never dispatched. */
  sdkTools?: string[];
  permissions: ToolPermissions;
  environmentRequirements?: EnvironmentRequirements;
  verification?: Verification;
  /** Longest wait for any of its tools, in ms. */
  timeoutMs?: number;
  /** Capabilities this context provides. */
  provides?: string[];
  /** Capabilities this context needs from others. */
  requires?: string[];
}

/** A skill of the profile: its contributed refs and required capabilities. */
export interface SkillRef {
  name: string;
  toolContextRefs?: string[];
  requires?: string[];
}

/** `system.tools.$resolve` request. */
export interface ResolveRequest {
  /** The agent profile's name (`default`, `edit`, `propose`, …). */
  profile: string;
  /** The profile's `tools.toolContextRefs`; when given, the built-in rules are not used. */
  toolContextRefs?: string[];
  /** The worker that runs the agent (`claude-code`, `codex`, …). */
  worker?: string;
  /** Skills, in order; their refs merge after the profile's. */
  skills?: SkillRef[];
  /** Capabilities the request needs. */
  requires?: string[];
  /** The worker's environment; contexts it cannot serve are left out. */
  environment?: Environment;
  /** Adds `providerTools` in this provider's format; default `matrix` (none). */
  format?: ProviderFormat;
  /** With `openai`: parameters made fit for strict mode, each loss reported as a diagnostic. */
  strict?: boolean;
  /** Leave out tools whose target has no live instance. */
  onlyAvailable?: boolean;
  /**
   * With `anthropic` or `openai`: past `threshold` tools (default 30), all but `keep` are marked
   * `defer_loading: true` and the search tool `tool_search` is added (PROTOCOL 13).
   */
  defer?: { keep?: string[]; threshold?: number };
}

/** `system.tools.$search` request (PROTOCOL 13). */
export interface SearchRequest {
  /** The session searched: a `$resolve` request, under the same grant rules. */
  session: ResolveRequest;
  /** What the caller needs a tool for, in words. */
  query: string;
  /** How many tools to return, 1..50; default 5. */
  limit?: number;
}

/** One tool a search found. */
export interface SearchedTool {
  name: string;
  description: string;
  /** Key of the context the tool came from. */
  context: string;
  /** Relevance (BM25+), higher first; ties in name order. */
  score: number;
}

/** `system.tools.$search` reply. */
export interface SearchReply {
  /** The best `limit` tools of the session, best first. */
  tools: SearchedTool[];
  /** How many of the session's tools matched at all. */
  total: number;
  /**
   * With the session's `format` `anthropic`: the `tool_result` content that loads the tools found
   * (`tool_reference` blocks); with `openai`: a `tool_search_output` item (the caller sets its
   * `call_id`). Absent for other formats.
   */
  providerResult?: AnthropicToolReference[] | OpenAIToolSearchOutput;
}

/** A tool of a resolved context, as the dispatcher needs it. */
export interface ResolvedTool extends MatrixToolProjection {
  resultMode: ResultMode;
  /** The dispatcher must ask `system.approvals` before each call. */
  requiresApproval: boolean;
  /** Key of the context the tool came from. */
  context: string;
  // `timeoutMs` here is the effective one: the smaller of the tool's and its context's.
  /** The context's `permissions.allowTargets`, for `matrix_invoke`-like tools. */
  allowTargets?: string[];
}

/** Something the resolver wants the caller to know. */
export interface Diagnostic {
  level: 'info' | 'warning' | 'error';
  /** Stable code, e.g. `tool_name_conflict`. */
  code: string;
  message: string;
  context?: string;
  tool?: string;
}

/** `system.tools.$resolve` reply: everything an oracle needs to offer tools to its LLM. */
export interface ResolvedToolContext {
  /** Keys of the merged contexts, in merge order. */
  contexts: string[];
  matrixTools: ResolvedTool[];
  sdkTools: string[];
  /** Each context's instructions under its title, in merge order. */
  instructions: string;
  /** The smallest timeout any merged context or tool sets; default 30000. */
  timeoutMs: number;
  environmentRequirements: EnvironmentRequirements;
  verification: Verification;
  diagnostics: Diagnostic[];
  /** The tools in the requested provider's own format (absent for `matrix`). */
  providerTools?: ProviderTool[];
  /** Registry revision the answer was computed from. */
  revision: number;
  /** SHA-256 (hex) of the canonical reply without `revision` and `digest`. */
  digest: string;
}

/** Where a context comes from. */
export type ContextSource = 'built-in' | 'registered';

/** `system.tools.$list` request. */
export interface ListRequest {
  cursor?: string;
  /** 1..500, default 100. */
  limit?: number;
  keys?: string[];
  tool?: string;
}

/** One context as `$list` shows it. */
export interface ListedContext {
  key: string;
  title: string;
  description: string;
  tools: string[];
  source: ContextSource;
  revision: number;
  /** Capabilities it provides (absent when none). */
  provides?: string[];
  /** Capabilities it requires (absent when none). */
  requires?: string[];
}

/** `system.tools.$list` reply. */
export interface ListReply {
  contexts: ListedContext[];
  /** Present when more pages follow. */
  nextCursor?: string;
  revision: number;
}

/** `$introspect` reply of any mount; the registry adds `revision`, `contexts`, `tools`, `diagnostics`. */
export interface IntrospectReply {
  mount: string;
  version: string;
  ops: Array<{
    op: string;
    description: string;
    requestSchema: Record<string, unknown>;
    responseSchema: Record<string, unknown>;
  }>;
  revision?: number;
  contexts?: number;
  tools?: number;
  /**
   * The registry's: stored contexts it leaves out (`stored_context_invalid`), at most 100 and one
   * counting the rest.
   */
  diagnostics?: Diagnostic[];
  /**
   * system.tools' and system.dispatcher's: the nats-server this instance is connected to now,
   * and what a grant bound by `nats.user` meets there (PROTOCOL 16).
   */
  natsServer?: NatsServerReport;
  instance: { id: string; startedAt: string };
}

/** `system.tools.$register` request. */
export interface RegisterRequest {
  spec: ToolContextSpec;
  /** Compare-and-set: 0 = only if the key is new; n = only if the context is at revision n. */
  expectedRevision?: number;
}

/** `system.tools.$unregister` request. */
export interface UnregisterRequest {
  key: string;
  /** Compare-and-set: only if the context is at this revision. */
  expectedRevision?: number;
}

/** Reply of `$register` and `$unregister`. */
export interface RegisterReply {
  key: string;
  /** Revision of the change; the context's revision after `$register`. */
  revision: number;
}

/** On `system.tools.events.changed` after every change. */
export interface ChangedEvent {
  key: string;
  change: 'registered' | 'updated' | 'unregistered';
  revision: number;
}
