/**
 * An oracle's side: resolve the tools of a profile that requires the capability
 * `weather.forecast` (the weather service provides it), show them in OpenAI's format, and
 * run the LLM's tool call through the dispatcher. Where the service trusts grant issuers, pass
 * the session's grant in MATRIX_GRANT: its profile and requirements are then the session's.
 *
 *   npm run build && node dist/examples/oracle.js
 *   MATRIX_GRANT=$(matrix-tools grant --issuer issuer.nk --principal agent:oracle --session s-1 \
 *     --profile default --requires weather.forecast) node dist/examples/oracle.js
 */
import {
  BusClient,
  connectBus,
  connectOptionsFromEnv,
  Dispatcher,
  GrantedSession,
  type ResolvedToolContext,
  type ResolveRequest,
} from '../src/index.js';

const nc = await connectBus({ ...connectOptionsFromEnv(), name: 'example-oracle' });
const client = new BusClient(nc);
const granted = process.env.MATRIX_GRANT
  ? new GrantedSession(process.env.MATRIX_GRANT, { format: 'openai' })
  : undefined;
const session: ResolveRequest = granted?.request ?? {
  profile: 'default',
  requires: ['weather.forecast'],
  format: 'openai',
};

const resolved = granted
  ? await granted.resolve(client)
  : await client.request<ResolvedToolContext>('system.tools', '$resolve', session);
console.log(
  `contexts: ${resolved.contexts.join(', ')} (revision ${resolved.revision}, digest ${resolved.digest.slice(0, 12)})`,
);
console.log(
  `tools for the LLM: ${JSON.stringify(resolved.providerTools?.map((t) => (t.function as { name: string }).name))}`,
);

// What the LLM would send back as a tool call:
const dispatcher = new Dispatcher(nc);
const toolCall = { id: 'call_1', name: 'weather_forecast', arguments: '{"city":"Lisbon","days":2}' };
const result = granted ? await granted.call(dispatcher, toolCall) : await dispatcher.call(session, toolCall);
console.log(`weather_forecast → isError=${result.isError}\n${result.content}`);
dispatcher.close();
client.close();
await nc.drain();
