/**
 * An oracle on the Vercel AI SDK: the session's tools (its grant's, from MATRIX_GRANT; NATS from
 * NATS_*) offered to the model, each call run by system.dispatcher. Pass any AI SDK model, e.g.
 * `openai('gpt-4.1')` from @ai-sdk/openai; the tests pass `ai/test`'s mock model.
 */
import { generateText, type LanguageModel, stepCountIs } from 'ai';
import { aiSdkTools } from '../src/adapters/ai-sdk.js';
import { openToolSession, type ToolSessionOptions } from '../src/index.js';

export async function aiSdkOracle(model: LanguageModel, prompt: string, options: ToolSessionOptions = {}) {
  const session = await openToolSession(options);
  try {
    const tools = aiSdkTools(session);
    return await generateText({ model, system: session.instructions, tools, prompt, stopWhen: stepCountIs(4) });
  } finally {
    await session.close();
  }
}
