/**
 * The public API: connect to the bus, call and mount ops, run the registry and the dispatcher,
 * provide tools, and the errors and wire types they speak. Everything else (codec, headers,
 * subjects, caches, validators…) is in `matrix-tool-registry/internal` and may change.
 */

// Approvals: durable pending approvals a person answers (PROTOCOL 8), and the gate that waits for them.
export { approvalGate, awaitDecision, type GateOptions } from './approvals/gate.js';
export type { ApprovalPolicyFile } from './approvals/policy.js';
export { type ApprovalsMountOptions, approvalsMount } from './approvals/system-approvals.js';
export type {
  AnswerReply,
  AnswerRequest,
  ApprovalEvent,
  PendingApproval,
  PendingReply,
  Verdict,
} from './approvals/types.js';
export type { CallEvent, RefusalSummary } from './audit/events.js';
export type { RefusalBudgetOptions } from './audit/refusals.js';
// The bus: connecting, calling ops, mounting them.
export { BusClient, type BusClientOptions, type RequestOptions } from './bus/client.js';
export { type ConnectOptions, connectBus, connectOptionsFromEnv } from './bus/connect.js';
export { type CallContext, CancelledError, type Progress } from './bus/context.js';
export {
  BadRequestError,
  ConflictError,
  ErrorCode,
  type ErrorDetails,
  ForbiddenError,
  InternalError,
  MatrixError,
  NotFoundError,
  PayloadTooLargeError,
  TimeoutError,
  UnavailableError,
  type Violation,
} from './bus/errors.js';
export type { Logger } from './bus/log.js';
export { Mount, type MountOptions, type OpContext, type OpSpec, type SchemaRef } from './bus/mount.js';
export { Mounts } from './bus/subjects.js';
// The dispatcher: runs an LLM's tool calls, as a library or as system.dispatcher.
export { Dispatcher, type DispatcherOptions } from './dispatcher/dispatcher.js';
export { type DispatcherMountOptions, dispatcherMount } from './dispatcher/system-dispatcher.js';
export { type ToolCall, ToolErrorCode, type ToolResult } from './dispatcher/types.js';

// Identity: session grants (who calls, with which profile), minted, presented and verified.
export { GrantError } from './identity/errors.js';
export { IdentityGate } from './identity/gate.js';
export { type GrantSpec, mintGrant, newIssuerKey } from './identity/mint.js';
export type { GrantAuthority, GrantClaims, VerifiedGrant } from './identity/types.js';
export { GrantVerifier, type GrantVerifierOptions } from './identity/verify.js';

// The oracle's side: a session's tools for an LLM, its calls through system.dispatcher.
export type { CallOptions, CallProgress } from './oracle/call.js';
export {
  type AnthropicToolResult,
  type AnthropicToolUse,
  type AnyToolCall,
  type OpenAIChatToolCall,
  type OpenAIFunctionCallOutput,
  type OpenAIResponsesFunctionCall,
  type OpenAIToolMessage,
  ResultFormat,
  type ToolResultMessages,
  toolResultMessage,
} from './oracle/tool-calls.js';
export {
  type ChangeListener,
  openToolSession,
  type SessionRequest,
  ToolSession,
  type ToolSessionOptions,
} from './oracle/tool-session.js';

// The reference mounts the built-in tools target.
export { agentsMount } from './reference-mounts/agents.js';
export { packagesMount } from './reference-mounts/packages.js';
export { sessionsMount } from './reference-mounts/sessions.js';
export { durableTracesMount, tracesMount } from './reference-mounts/traces.js';
// The registry: contexts of tools, resolved per profile, served as system.tools.
export { KvContextStore, type KvStoreOptions } from './registry/kv-store.js';
export type {
  AnthropicTool,
  AnthropicToolReference,
  McpTool,
  McpToolAnnotations,
  OpenAIFunctionTool,
  OpenAIToolSearchOutput,
  OpenAIToolSearchTool,
  ProviderTool,
  ProviderToolsByFormat,
} from './registry/provider-tools.js';
export { Registry } from './registry/registry.js';
export { type ResolveOptions, resolveToolContext } from './registry/resolver.js';
export { StaticStore, type ToolContextStore } from './registry/store.js';
export { type RegistryMountOptions, registryMount } from './registry/system-tools.js';
export { ToolProvider, type ToolProviderOptions } from './registry/tool-provider.js';
export type {
  ChangedEvent,
  IntrospectReply,
  ListReply,
  MatrixToolProjection,
  RegisterReply,
  ResolvedTool,
  ResolvedToolContext,
  ResolveRequest,
  SearchedTool,
  SearchReply,
  SearchRequest,
  ToolContextSpec,
} from './registry/types.js';
// Tasks: tool calls that outlive one request, durable in KV matrix-tasks, served as system.tasks.
export { TaskRunner, type TaskRunnerOptions } from './tasks/runner.js';
export { TaskStore, type TaskStoreOptions } from './tasks/store.js';
export { type TasksMountOptions, tasksMount } from './tasks/system-tasks.js';
export {
  MAX_LIVE_TASKS_PER_PRINCIPAL,
  type Task,
  type TaskListReply,
  type TaskListRequest,
  type TaskRef,
  type TaskResultRequest,
  TaskStatus,
} from './tasks/types.js';
