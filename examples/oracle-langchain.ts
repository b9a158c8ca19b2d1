/**
 * An oracle on LangChain.js: the session's tools (its grant's, from MATRIX_GRANT; NATS from
 * NATS_*) bound to a chat model, the model's tool calls run by system.dispatcher and answered
 * with ToolMessages. Pass any chat model that binds tools, e.g. `new ChatOpenAI({model})`; the
 * tests pass LangChain's fake chat model.
 */
import type { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { type BaseMessage, HumanMessage, SystemMessage } from '@langchain/core/messages';
import { langChainTools } from '../src/adapters/langchain.js';
import { openToolSession, type ToolSessionOptions } from '../src/index.js';

export async function langChainOracle(model: BaseChatModel, prompt: string, options: ToolSessionOptions = {}) {
  const session = await openToolSession(options);
  try {
    const tools = langChainTools(session);
    const bound = model.bindTools?.(tools) ?? model;
    const messages: BaseMessage[] = [new SystemMessage(session.instructions), new HumanMessage(prompt)];
    const asked = await bound.invoke(messages);
    messages.push(asked);
    for (const call of asked.tool_calls ?? []) {
      const tool = tools.find((t) => t.name === call.name);
      if (tool) messages.push(await tool.invoke(call));
    }
    messages.push(await bound.invoke(messages));
    return messages;
  } finally {
    await session.close();
  }
}
