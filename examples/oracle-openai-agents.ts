/**
 * An oracle on the OpenAI Agents SDK: an Agent with the session's tools (its grant's, from
 * MATRIX_GRANT; NATS from NATS_*), each call run by system.dispatcher. Without `model` the
 * Agents SDK's default OpenAI model is used (OPENAI_API_KEY); the tests pass a scripted `Model`.
 */
import { Agent, type Model, run } from '@openai/agents';
import { agentsTools } from '../src/adapters/openai-agents.js';
import { openToolSession, type ToolSessionOptions } from '../src/index.js';

export async function agentsOracle(model: Model | undefined, prompt: string, options: ToolSessionOptions = {}) {
  const session = await openToolSession(options);
  try {
    const agent = new Agent({ name: 'oracle', instructions: session.instructions, tools: agentsTools(session), model });
    return await run(agent, prompt, { maxTurns: 4 });
  } finally {
    await session.close();
  }
}
