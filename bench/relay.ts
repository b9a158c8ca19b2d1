/**
 * The two-hop limit of the benchmark, in its own process: receives a request on `bench.relay.*`,
 * requests the echo target with the protocol's context headers (one muxed inbox, no timer, no
 * decoding), and answers with the echo's bytes. What `system.dispatcher` does, without its work.
 */
import { createInbox, type Msg } from '@nats-io/nats-core';
import { connectBus, connectOptionsFromEnv } from '../src/bus/connect.js';
import { readContext, writeContext } from '../src/bus/headers.js';

const nc = await connectBus({ ...connectOptionsFromEnv(), name: 'bench-relay' });
const inbox = `${createInbox()}.`;
const pending = new Map<string, Msg>();
let next = 0;
nc.subscribe(`${inbox}*`, {
  callback: (_err, reply) => {
    const request = pending.get(reply.subject);
    pending.delete(reply.subject);
    request?.respond(reply.data);
  },
});
nc.subscribe('bench.relay.*', {
  queue: 'bench-relay',
  callback: (_err, msg) => {
    const reply = inbox + (next++).toString(36);
    pending.set(reply, msg);
    nc.publish('bench.echo.$echo', msg.data, { reply, headers: writeContext(readContext(msg.headers)) });
  },
});
await nc.flush();
process.stdout.write('ready\n');
process.on('SIGTERM', () => void nc.drain().then(() => process.exit(0)));
