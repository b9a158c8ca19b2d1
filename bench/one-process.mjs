// The one-process stack bench/tasks-ab.mjs and bench/grant-ab.mjs measure: the registry serving
// the built-in contexts and one echo tool, and its echo target, from the build of any checkout
// (`<dir>/dist/src`), so that an earlier commit runs the same harness; and the measure itself,
// wall time and this process's CPU per call.
import { pathToFileURL } from 'node:url';

/** The stack from `dir`'s build on `url`: `load` imports more of that build; `stop` ends it all. */
export async function oneProcessStack(dir, url) {
  const load = (p) => import(pathToFileURL(`${dir}/dist/src/${p}`).href);
  const { connectBus } = await load('bus/connect.js');
  const { BusClient } = await load('bus/client.js');
  const { Mount } = await load('bus/mount.js');
  const { Registry } = await load('registry/registry.js');
  const { StaticStore, storedBuiltin } = await load('registry/store.js');
  const { registryMount } = await load('registry/system-tools.js');
  const { builtinContexts } = await load('registry/builtins.js');
  const nc = await connectBus({ servers: url });
  const tag = `ab${process.pid}`;
  const spec = {
    key: `ab-${tag}`,
    title: 'ab',
    description: 'ab',
    matrixTools: [
      { name: 'echo', description: 'echo', inputSchema: { type: 'object' }, target: `app.${tag}`, op: '$echo' },
    ],
    permissions: { approval: 'never' },
  };
  const store = new StaticStore(
    [...builtinContexts.map(storedBuiltin), { spec, source: 'registered', revision: 1 }],
    1,
  );
  const registry = await registryMount(nc, { registry: new Registry(store) }).start();
  const target = await new Mount(nc, {
    name: `app.${tag}`,
    version: '0.0.1',
    description: 'echo',
    ops: {
      $echo: { description: 'echo', request: { type: 'object' }, response: { type: 'object' }, handle: (r) => r },
    },
  }).start();
  const client = new BusClient(nc, { timeoutMs: 10_000 });
  return {
    load,
    nc,
    tag,
    client,
    session: { profile: 'default', toolContextRefs: [spec.key] },
    stop: async () => {
      await target.stop();
      await registry.stop();
      client.close();
      await nc.close();
    },
  };
}

/**
 * `call(i)` 2,000 times to warm up (a result that is an error stops the run), then `total` times,
 * 16 in flight: wall time and this process's CPU per call, in µs.
 */
export async function perCall(call, total) {
  for (let i = 0; i < 2000; i++) {
    const result = await call(i);
    if (result?.isError) throw new Error(result.content);
  }
  let next = 0;
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < total) await call(next++);
    }),
  );
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return {
    calls: total,
    usPerCall: +((ms * 1000) / total).toFixed(2),
    cpuUsPerCall: +((cpu.user + cpu.system) / total).toFixed(2),
  };
}
