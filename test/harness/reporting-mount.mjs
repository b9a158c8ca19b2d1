// An honest mount, in its own process, as a mount user of deploy/nats.conf runs it: it reports
// progress (PROTOCOL 10) on a call that asks for it (`Matrix-Progress: 1`), at most one report each
// 50 ms (the MCP host's thinning: src/mcp/host/calls.ts PROGRESS_EVERY_MS), each a small
// MessagePack map {progress: n, total: 60}.
// - `$work`: reports (when asked) every 50 ms for `workMs`, then replies {done: true}.
// - `$quick`: replies {done: true} at once.
// Arguments: a JSON object {servers, user, pass, mount, workMs}. Prints `mounted` when it serves.

import { encode } from '@msgpack/msgpack';
import { headers as natsHeaders } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';

const spec = JSON.parse(process.argv[2]);
const nc = await connect({ servers: spec.servers, user: spec.user, pass: spec.pass });
const progress = natsHeaders();
progress.set('Matrix-Progress', '1');
const done = encode({ done: true });

nc.subscribe(`${spec.mount}.*`, {
  callback: (_err, msg) => {
    const op = msg.subject.slice(spec.mount.length + 1);
    if (op === '$quick') {
      msg.respond(done);
      return;
    }
    if (op !== '$work') return;
    const wants = msg.headers?.get('Matrix-Progress') === '1';
    const started = Date.now();
    let n = 0;
    const timer = setInterval(() => {
      if (Date.now() - started >= spec.workMs) {
        clearInterval(timer);
        msg.respond(done);
        return;
      }
      if (wants) msg.respond(encode({ progress: ++n, total: 60 }), { headers: progress });
    }, 50);
  },
});
await nc.flush();
process.stdout.write('mounted\n');
process.on('SIGTERM', () => void nc.close().then(() => process.exit(0)));
