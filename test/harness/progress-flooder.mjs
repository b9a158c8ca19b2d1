// A mount that floods, in its own process (its sending costs the measuring process nothing), as
// a mount user of deploy/nats.conf may: it serves `<mount>.$flood` and `<mount>.$junk`.
// - `$flood`: publishes progress reports (`Matrix-Progress: 1`, body {progress: n}) onto the
//   request's reply subject as fast as the connection takes them, for `seconds`, then replies.
// - `$junk`: replies at once, then publishes junk for `seconds` onto the inbox the reply subject
//   names (its prefix, with a new last token each time): the service's reply inbox with
//   no call of this mount in flight.
// Arguments: a JSON object {servers, user, pass, mount, seconds}. Prints `mounted` when it
// serves, and `sent <n>` for each flood it ends.
import { headers as natsHeaders } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';

const spec = JSON.parse(process.argv[2]);
const nc = await connect({ servers: spec.servers, user: spec.user, pass: spec.pass });
// {progress: 1} in MessagePack: a fixmap of one, the key as a fixstr of 8, the value 1.
const report = new Uint8Array([0x81, 0xa8, ...new TextEncoder().encode('progress'), 0x01]);
const progress = natsHeaders();
progress.set('Matrix-Progress', '1');
const junk = new TextEncoder().encode('junk');

/** Publishes `message(n)` as fast as the connection takes it for `seconds`; returns how many. */
async function flood(message) {
  const until = performance.now() + spec.seconds * 1000;
  let sent = 0;
  while (performance.now() < until && !nc.isClosed()) {
    for (let i = 0; i < 500; i++) message(sent++);
    await nc.flush();
  }
  return sent;
}

nc.subscribe(`${spec.mount}.*`, {
  callback: (_err, msg) => {
    const op = msg.subject.slice(spec.mount.length + 1);
    void (async () => {
      if (op === '$flood') {
        const sent = await flood(() => nc.publish(msg.reply, report, { headers: progress }));
        msg.respond(new Uint8Array([0x81, 0xa4, ...new TextEncoder().encode('done'), 0xc3]));
        process.stdout.write(`sent ${sent}\n`);
      } else if (op === '$junk') {
        msg.respond(new Uint8Array([0x80]));
        const inbox = msg.reply.slice(0, msg.reply.lastIndexOf('.') + 1);
        const sent = await flood((n) => nc.publish(`${inbox}j${n}`, junk));
        process.stdout.write(`sent ${sent}\n`);
      }
    })();
  },
});
await nc.flush();
process.stdout.write('mounted\n');
process.on('SIGTERM', () => void nc.close().then(() => process.exit(0)));
