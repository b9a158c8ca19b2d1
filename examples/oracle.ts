/**
 * An oracle's side: resolve the tools of a profile that requires the capability
 * `weather.forecast` (the weather service provides it), show them in OpenAI's format, and
 * run the LLM's tool call through the dispatcher.
 *
 *   npm run build && node dist/examples/oracle.js
 */
import { BusClient, connectBus, connectOptionsFromEnv, Dispatcher, type ResolvedToolContext, type ResolveRequest } from '../src/index.js';

const nc = await connectBus({ ...connectOptionsFromEnv(), name: 'example-oracle' });
const session: ResolveRequest = { profile: 'default', requires: ['weather.forecast'], format: 'openai' };

const resolved = await new BusClient(nc).request<ResolvedToolContext>('system.tools', '$resolve', session);
console.log(`contexts: ${resolved.contexts.join(', ')} (revision ${resolved.revision}, digest ${resolved.digest.slice(0, 12)})`);
console.log(`tools for the LLM: ${JSON.stringify(resolved.providerTools?.map((t) => (t.function as { name: string }).name))}`);

// What the LLM would send back as a tool call:
const dispatcher = new Dispatcher(nc);
const result = await dispatcher.call(session, { id: 'call_1', name: 'weather_forecast', arguments: '{"city":"Lisbon","days":2}' });
console.log(`weather_forecast → isError=${result.isError}\n${result.content}`);
dispatcher.close();
await nc.drain();
