// A/B of a granted $call on one stack (issue 25's grant rows): one process holds the caller, the
// registry, the dispatcher and an echo target; `grant` runs the dispatcher behind a gate trusting
// one issuer and calls with a cached grant, `plain` trusts callers and sends the same principal
// and session as headers. It prints the wall time and the process CPU per call. Build the
// checkout (npm run build), start a nats-server with -js, then alternate:
//   [AUDIT=1] node bench/grant-ab.mjs <checkout dir> <nats url> <calls> plain|grant
import { createAccount } from '@nats-io/nkeys';
import { oneProcessStack, perCall } from './one-process.mjs';

const [dir, url, n, mode] = process.argv.slice(2);
const stack = await oneProcessStack(dir, url);
const { load, nc, client, session } = stack;
const { dispatcherMount } = await load('dispatcher/system-dispatcher.js');
const { Dispatcher } = await load('dispatcher/dispatcher.js');
const { IdentityGate } = await load('identity/gate.js');
const { mintGrant } = await load('identity/mint.js');

const issuer = createAccount();
const identity = mode === 'grant' ? IdentityGate.forIssuers([issuer.getPublicKey()]) : IdentityGate.trustingCallers();
const audit = process.env.AUDIT === '1';
const dispatcher = new Dispatcher(nc, {
  audit,
  identity,
  trailShare: audit ? { bytesPerSecond: 1e9, burstBytes: 2 ** 26 } : undefined,
});
const mount = await dispatcherMount(nc, { dispatcher, identity }).start();
const grant = mintGrant(issuer, { principal: 'agent:bench', session: 's-bench', resolve: session, ttlSeconds: 3600 });
const as = mode === 'grant' ? { grant } : { principal: 'agent:bench', session: 's-bench' };
const call = (i) =>
  client.request('system.dispatcher', '$call', { session, call: { id: `c${i}`, name: 'echo', arguments: { i } } }, as);
const measured = await perCall(call, Number(n));
console.log(JSON.stringify({ mode, audit, ...measured }));
await mount.stop();
dispatcher.close();
await stack.stop();
