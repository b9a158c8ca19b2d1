// What a grant's bytes cost nats-server (issue 25's grant rows): requests at 64 in flight to an
// echo, with the protocol's context headers, alternating rounds without and with one more header
// of BYTES characters (default 582, the length of the bench's grant). Prints nats-server's CPU
// per request (from /proc) and this process's (caller and echo), each round. It starts a
// nats-server of its own on 127.0.0.1; build first (npm run build), then on an idle box:
//   node bench/header-cost.mjs [rounds] [ms per round]
import { spawn } from 'node:child_process';
import { connect, headers } from '@nats-io/transport-node';
import { processCpu as cpuUs } from '../dist/bench/measure.js';

const [rounds = '6', ms = '2000'] = process.argv.slice(2);
const BYTES = Number(process.env.BYTES ?? 582);
const port = 4290 + (process.pid % 50);
const server = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
await new Promise((resolve) => setTimeout(resolve, 600));
const url = `nats://127.0.0.1:${port}`;
const [caller, echo] = await Promise.all([connect({ servers: url }), connect({ servers: url })]);
echo.subscribe('bench.echo', { callback: (_err, m) => m.respond(m.data) });
const grant = 'g'.repeat(BYTES);

async function round(withGrant) {
  let n = 0;
  const end = Date.now() + Number(ms);
  const [own, served] = [process.cpuUsage(), cpuUs(server.pid)];
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (Date.now() < end) {
        const h = headers();
        h.set('Traceparent', '00-0123456789abcdef0123456789abcdef-0123456789abcdef-01');
        h.set('Matrix-Session', 'bench');
        h.set('Matrix-Principal', 'agent:bench');
        if (withGrant) h.set('Matrix-Grant', grant);
        await caller.request('bench.echo', 'hello', { timeout: 5000, headers: h });
        n++;
      }
    }),
  );
  const spent = process.cpuUsage(own);
  return { n, server: (cpuUs(server.pid) - served) / n, here: (spent.user + spent.system) / n };
}

try {
  await round(false);
  for (let r = 0; r < Number(rounds); r++) {
    const [plain, granted] = [await round(false), await round(true)];
    const fmt = (x) => `${x.n} calls, nats-server ${x.server.toFixed(1)} µs, caller+echo ${x.here.toFixed(1)} µs`;
    console.log(`round ${r}: without ${fmt(plain)} | with ${BYTES} more bytes ${fmt(granted)}`);
  }
} finally {
  await Promise.all([caller.close(), echo.close()]);
  server.kill();
}
