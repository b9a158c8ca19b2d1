// A/B of a granted $call on one stack (issue 25's grant rows): one process holds the caller, the
// registry, the dispatcher and an echo target; `grant` runs the dispatcher behind a gate trusting
// one issuer and calls with a cached grant, `plain` trusts callers and sends the same principal
// and session as headers. It prints the wall time and the process CPU per call. Build the
// checkout (npm run build), start a nats-server with -js, then alternate:
//   [AUDIT=1] node bench/grant-ab.mjs <checkout dir> <nats url> <calls> plain|grant

import { pathToFileURL } from 'node:url';
import { createAccount } from '@nats-io/nkeys';

const [dir, url, n, mode] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(`${dir}/dist/src/${p}`).href);
const { connectBus } = await load('bus/connect.js');
const { BusClient } = await load('bus/client.js');
const { Mount } = await load('bus/mount.js');
const { dispatcherMount } = await load('dispatcher/system-dispatcher.js');
const { Dispatcher } = await load('dispatcher/dispatcher.js');
const { Registry } = await load('registry/registry.js');
const { StaticStore, storedBuiltin } = await load('registry/store.js');
const { registryMount } = await load('registry/system-tools.js');
const { builtinContexts } = await load('registry/builtins.js');
const { IdentityGate } = await load('identity/gate.js');
const { mintGrant } = await load('identity/mint.js');

const nc = await connectBus({ servers: url });
const tag = `gab${process.pid}`;
const spec = {
  key: `ab-${tag}`,
  title: 'ab',
  description: 'ab',
  matrixTools: [
    { name: 'echo', description: 'echo', inputSchema: { type: 'object' }, target: `app.${tag}`, op: '$echo' },
  ],
  permissions: { approval: 'never' },
};
const store = new StaticStore([...builtinContexts.map(storedBuiltin), { spec, source: 'registered', revision: 1 }], 1);
const registry = await registryMount(nc, { registry: new Registry(store) }).start();
const target = await new Mount(nc, {
  name: `app.${tag}`,
  version: '0.0.1',
  description: 'echo',
  ops: { $echo: { description: 'echo', request: { type: 'object' }, response: { type: 'object' }, handle: (r) => r } },
}).start();

const issuer = createAccount();
const session = { profile: 'default', toolContextRefs: [spec.key] };
const identity = mode === 'grant' ? IdentityGate.forIssuers([issuer.getPublicKey()]) : IdentityGate.trustingCallers();
const audit = process.env.AUDIT === '1';
const dispatcher = new Dispatcher(nc, {
  audit,
  identity,
  trailShare: audit ? { bytesPerSecond: 1e9, burstBytes: 2 ** 26 } : undefined,
});
const mount = await dispatcherMount(nc, { dispatcher, identity }).start();
const client = new BusClient(nc, { timeoutMs: 10_000 });
const grant = mintGrant(issuer, { principal: 'agent:bench', session: 's-bench', resolve: session, ttlSeconds: 3600 });
const as = mode === 'grant' ? { grant } : { principal: 'agent:bench', session: 's-bench' };
const call = (i) =>
  client.request('system.dispatcher', '$call', { session, call: { id: `c${i}`, name: 'echo', arguments: { i } } }, as);

for (let i = 0; i < 2000; i++) {
  const result = await call(i); // warm, and a refused call stops the run
  if (result.isError) throw new Error(result.content);
}
const total = Number(n);
const conc = 16;
let next = 0;
const t0 = performance.now();
const cpu0 = process.cpuUsage();
await Promise.all(
  Array.from({ length: conc }, async () => {
    while (next < total) await call(next++);
  }),
);
const ms = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
console.log(
  JSON.stringify({
    mode,
    audit,
    calls: total,
    usPerCall: +((ms * 1000) / total).toFixed(2),
    cpuUsPerCall: +((cpu.user + cpu.system) / total).toFixed(2),
  }),
);
await mount.stop();
dispatcher.close();
await target.stop();
await registry.stop();
client.close();
await nc.close();
