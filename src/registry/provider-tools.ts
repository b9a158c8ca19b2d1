/**
 * The tool formats `$resolve` renders `providerTools` in (PROTOCOL 5.2 `format`), as each
 * provider's API takes them: OpenAI function tools (Chat Completions `tools`), Anthropic tools
 * (Messages `tools`), MCP `Tool`s (`tools/list`). Only the fields this registry writes.
 */
import type { JsonSchemaObject, TaskSupport } from './types.js';

/** An OpenAI Chat Completions function tool: `{type: "function", function: {…}}`. */
export interface OpenAIFunctionTool {
  type: 'function';
  function: {
    /** The tool's name, `^[a-zA-Z0-9_-]{1,64}$`. */
    name: string;
    description: string;
    /**
     * JSON Schema of the arguments; with `strict: true`, the strict-mode form (every object closed,
     * every property required).
     */
    parameters: JsonSchemaObject;
    /** Present when the session asked for strict mode: `true` when the schema could be made strict, else `false`. */
    strict?: boolean;
  };
  /** Set past the session's defer threshold (PROTOCOL 13): loaded only once `tool_search` finds it. */
  defer_loading?: true;
}

/**
 * OpenAI's tool search, run by the client (`execution: "client"`): the model sends a
 * `tool_search_call` with these parameters; the answer is a `tool_search_output` (PROTOCOL 13).
 */
export interface OpenAIToolSearchTool {
  type: 'tool_search';
  execution: 'client';
  description: string;
  /** JSON Schema of the search's arguments: `query`, `limit?`. */
  parameters: JsonSchemaObject;
}

/** An Anthropic Messages API tool. */
export interface AnthropicTool {
  name: string;
  description: string;
  /** JSON Schema of the input (type `object`). */
  input_schema: JsonSchemaObject;
  /** Set past the session's defer threshold (PROTOCOL 13): loaded once a `tool_reference` names it. */
  defer_loading?: true;
}

/** MCP's tool hints, as `tools/list` carries them (each absent when the projection does not say). */
export interface McpToolAnnotations {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

/** An MCP `Tool` of `tools/list`. */
export interface McpTool {
  name: string;
  description: string;
  /** JSON Schema of the arguments (type `object`). */
  inputSchema: JsonSchemaObject;
  /**
   * JSON Schema (type `object`) of the tool's `structuredContent`, where its projection has one
   * (a hosted MCP server's tool): the bridge then passes the server's own `structuredContent`.
   */
  outputSchema?: JsonSchemaObject;
  annotations?: McpToolAnnotations;
  /** MCP's `execution`: whether a call may, must or must not be a task (PROTOCOL 9). */
  execution: { taskSupport: TaskSupport };
}

/** The tools of each provider format; `matrix` renders none (the projections are the format). */
export interface ProviderToolsByFormat {
  matrix: undefined;
  openai: OpenAIFunctionTool[];
  anthropic: AnthropicTool[];
  mcp: McpTool[];
}

/** A tool in any provider format. */
export type ProviderTool = OpenAIFunctionTool | OpenAIToolSearchTool | AnthropicTool | McpTool;

/** Anthropic's answer to a tool search: a `tool_result`'s content block naming a tool to load. */
export interface AnthropicToolReference {
  type: 'tool_reference';
  tool_name: string;
}

/**
 * OpenAI's answer to a client-run tool search: the found tools' definitions, loaded for the next
 * turn. The caller sets `call_id` to its `tool_search_call`'s.
 */
export interface OpenAIToolSearchOutput {
  type: 'tool_search_output';
  execution: 'client';
  status: 'completed';
  tools: OpenAIFunctionTool[];
}
