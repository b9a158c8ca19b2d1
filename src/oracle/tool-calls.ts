/**
 * The tool calls of the raw provider SDKs, as they come, and what each API wants back. An
 * oracle on the OpenAI or Anthropic SDK hands `session.call` the model's call unchanged and
 * appends `toolResultMessage(result, provider)` to the conversation.
 */
import type { ToolCall, ToolResult } from '../dispatcher/types.js';

/** A Chat Completions `tool_calls[]` entry. */
export interface OpenAIChatToolCall {
  id: string;
  type: 'function';
  function: {
    name: string;
    /** The arguments' JSON text, as the model wrote it. */
    arguments: string;
  };
}

/** A Responses API `function_call` output item. */
export interface OpenAIResponsesFunctionCall {
  type: 'function_call';
  /** The id the result must name (`function_call_output.call_id`). */
  call_id: string;
  name: string;
  /** The arguments' JSON text, as the model wrote it. */
  arguments: string;
  /** The item's own id (not the call's). */
  id?: string;
}

/** An Anthropic Messages `tool_use` content block. */
export interface AnthropicToolUse {
  type: 'tool_use';
  id: string;
  name: string;
  /** The arguments, already an object. */
  input: unknown;
}

/** Every shape `ToolSession.call` takes: ours, or a provider's as it came. */
export type AnyToolCall = ToolCall | OpenAIChatToolCall | OpenAIResponsesFunctionCall | AnthropicToolUse;

/** Whom a tool result goes back to: Chat Completions, the Responses API, or Anthropic Messages. */
export const ResultFormat = { OpenAI: 'openai', OpenAIResponses: 'openai-responses', Anthropic: 'anthropic' } as const;
export type ResultFormat = (typeof ResultFormat)[keyof typeof ResultFormat];

/** A Chat Completions `tool` message. */
export interface OpenAIToolMessage {
  role: 'tool';
  tool_call_id: string;
  content: string;
}

/** A Responses API `function_call_output` input item. */
export interface OpenAIFunctionCallOutput {
  type: 'function_call_output';
  call_id: string;
  output: string;
}

/** An Anthropic `tool_result` content block (goes in a `user` message). */
export interface AnthropicToolResult {
  type: 'tool_result';
  tool_use_id: string;
  content: string;
  /** Set when the call failed: the model reads `content` as the error. */
  is_error?: true;
}

/** What each API takes back for one tool result. */
export interface ToolResultMessages {
  openai: OpenAIToolMessage;
  'openai-responses': OpenAIFunctionCallOutput;
  anthropic: AnthropicToolResult;
}

/** The dispatcher's `ToolCall` for any accepted shape. */
export function toToolCall(call: AnyToolCall): ToolCall {
  if ('function' in call) return { id: call.id, name: call.function.name, arguments: call.function.arguments };
  if ('type' in call && call.type === 'function_call')
    return { id: call.call_id, name: call.name, arguments: call.arguments };
  if ('type' in call && call.type === 'tool_use')
    return { id: call.id, name: call.name, arguments: argumentsOf(call.input) };
  return call;
}

/**
 * A model's input (an Anthropic `input`, a framework's parsed arguments) as the dispatcher takes
 * arguments: an object as it is; anything else as JSON text, so that the dispatcher says what is
 * wrong with it.
 */
export function argumentsOf(input: unknown): ToolCall['arguments'] {
  if (input === undefined) return undefined;
  if (input !== null && typeof input === 'object' && !Array.isArray(input)) return { ...input };
  return JSON.stringify(input);
}

/** The message (OpenAI) or content block (Anthropic) that carries `result` back to the model. */
export function toolResultMessage<F extends ResultFormat>(result: ToolResult, format: F): ToolResultMessages[F] {
  return resultBuilders[format](result);
}

const resultBuilders: { [F in ResultFormat]: (result: ToolResult) => ToolResultMessages[F] } = {
  openai: (r) => ({ role: 'tool', tool_call_id: r.callId, content: r.content }),
  'openai-responses': (r) => ({ type: 'function_call_output', call_id: r.callId, output: r.content }),
  anthropic: (r) =>
    r.isError
      ? { type: 'tool_result', tool_use_id: r.callId, content: r.content, is_error: true }
      : { type: 'tool_result', tool_use_id: r.callId, content: r.content },
};
