/**
 * An oracle's side with no framework: open the session (its grant's, from MATRIX_GRANT, where
 * the service trusts issuers; else the profile `default` requiring `weather.forecast`), give the
 * model its tools in OpenAI's format, run the model's tool call as it came through
 * system.dispatcher, and hand the model back the message it wants. NATS from NATS_*: it runs as
 * the `agent` user of deploy/nats.conf (NATS_USER=agent NATS_INBOX_PREFIX=_INBOX_agent).
 *
 *   npm run build && node dist/examples/oracle.js
 *   MATRIX_GRANT=$(matrix-tools grant --issuer issuer.nk --principal agent:oracle --session s-1 \
 *     --profile default --requires weather.forecast) node dist/examples/oracle.js
 */
import { type OpenAIChatToolCall, openToolSession, toolResultMessage } from '../src/index.js';

const session = await openToolSession({
  name: 'example-oracle',
  format: 'openai',
  ...(process.env.MATRIX_GRANT ? {} : { session: { profile: 'default', requires: ['weather.forecast'] } }),
});
const { contexts, revision } = session.resolution;
console.log(`contexts: ${contexts.join(', ')} (revision ${revision}, digest ${session.digest.slice(0, 12)})`);
console.log(`tools for the LLM: ${JSON.stringify(session.providerTools.map((t) => t.function.name))}`);

// What the LLM would send back as a tool call (Chat Completions `tool_calls[0]`):
const toolCall: OpenAIChatToolCall = {
  id: 'call_1',
  type: 'function',
  function: { name: 'weather_forecast', arguments: '{"city":"Lisbon","days":2}' },
};
const result = await session.call(toolCall);
console.log(`weather_forecast → isError=${result.isError}\n${result.content}`);
console.log(`back to the model: ${JSON.stringify(toolResultMessage(result, 'openai'))}`);
await session.close();
