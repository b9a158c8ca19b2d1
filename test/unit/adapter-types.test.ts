/**
 * Each adapter's output is its framework's own type (no `any`), and a session's `providerTools`
 * are typed by the format asked for: held by the type checker (`npm run typecheck` covers test/).
 */
import type { StructuredToolInterface } from '@langchain/core/tools';
import type { Agent, Tool as AgentsTool, FunctionTool } from '@openai/agents';
import type { ToolSet } from 'ai';
import { describe, expectTypeOf, it } from 'vitest';
import { aiSdkTools } from '../../src/adapters/ai-sdk.js';
import type { langChainTools } from '../../src/adapters/langchain.js';
import type { agentsTools } from '../../src/adapters/openai-agents.js';
import type {
  AnthropicTool,
  AnthropicToolResult,
  McpTool,
  OpenAIFunctionTool,
  OpenAIToolMessage,
  ToolSession,
} from '../../src/index.js';
import { toolResultMessage } from '../../src/index.js';

describe('the adapters’ types', () => {
  it('aiSdkTools gives the AI SDK’s ToolSet', () => {
    expectTypeOf(aiSdkTools<'matrix'>).returns.not.toBeAny();
    expectTypeOf(aiSdkTools<'matrix'>).returns.toEqualTypeOf<ToolSet>();
  });

  it('agentsTools gives Agents SDK FunctionTools an Agent takes', () => {
    type Made = ReturnType<typeof agentsTools<'matrix'>>[number];
    expectTypeOf<Made>().not.toBeAny();
    expectTypeOf<Made>().toExtend<FunctionTool<unknown, never, string> | FunctionTool>();
    expectTypeOf<Made>().toExtend<AgentsTool>();
    expectTypeOf<Made[]>().toExtend<NonNullable<ConstructorParameters<typeof Agent>[0]['tools']>>();
  });

  it('langChainTools gives LangChain structured tools', () => {
    type Made = ReturnType<typeof langChainTools<'matrix'>>[number];
    expectTypeOf<Made>().not.toBeAny();
    expectTypeOf<Made>().toExtend<StructuredToolInterface>();
  });
});

describe('a session’s provider types', () => {
  it('types providerTools by the session’s format', () => {
    expectTypeOf<ToolSession<'openai'>['providerTools']>().toEqualTypeOf<OpenAIFunctionTool[]>();
    expectTypeOf<ToolSession<'anthropic'>['providerTools']>().toEqualTypeOf<AnthropicTool[]>();
    expectTypeOf<ToolSession<'mcp'>['providerTools']>().toEqualTypeOf<McpTool[]>();
    expectTypeOf<ToolSession['providerTools']>().toEqualTypeOf<undefined>();
  });

  it('types toolResultMessage by the API it answers', () => {
    expectTypeOf(toolResultMessage<'openai'>).returns.toEqualTypeOf<OpenAIToolMessage>();
    expectTypeOf(toolResultMessage<'anthropic'>).returns.toEqualTypeOf<AnthropicToolResult>();
  });
});
