// A hostile mount, in its own process, as a mount user of deploy/nats.conf may run it: it serves
// `<mount>.*` and sends large messages onto each request's reply subject, each within what the
// service counts (a message count, never bytes).
// - `$reports`: `reports` progress reports (`Matrix-Progress: 1`), each a MessagePack map
//   {progress: n, pad: <bytes>} of `bytes` bytes, then a small reply. Sent in batches of 50 with a
//   flush between, for as long as the reply subject takes them.
// - `$big`: waits `delayMs`, then replies with one MessagePack map {pad: <bytes>} of `bytes` bytes.
// Arguments: a JSON object {servers, user, pass, mount, reports, bytes, delayMs, text}. Prints `mounted`
// when it serves, and `sent <n>` for each `$reports` it ends.
import { headers as natsHeaders } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';

const spec = JSON.parse(process.argv[2]);
const nc = await connect({ servers: spec.servers, user: spec.user, pass: spec.pass });
const progress = natsHeaders();
progress.set('Matrix-Progress', '1');

/**
 * A MessagePack map {progress: 1, pad: …} of `bytes` bytes in all: `pad` a bin32 (bytes), or
 * with `spec.text` a str32 (a string).
 */
function padded(bytes, withProgress) {
  const head = withProgress ? [0x82, 0xa8, ...new TextEncoder().encode('progress'), 0x01] : [0x81];
  const key = [0xa3, ...new TextEncoder().encode('pad')];
  const n = Math.max(0, bytes - head.length - key.length - 5);
  const out = new Uint8Array(head.length + key.length + 5 + n);
  out.set(head, 0);
  out.set(key, head.length);
  const at = head.length + key.length;
  out[at] = spec.text ? 0xdb : 0xc6;
  new DataView(out.buffer).setUint32(at + 1, n);
  out.fill(0x61, at + 5);
  return out;
}

const report = padded(spec.bytes, true);
const big = padded(spec.bytes, false);
const done = new Uint8Array([0x81, 0xa4, ...new TextEncoder().encode('done'), 0xc3]);

nc.subscribe(`${spec.mount}.*`, {
  callback: (_err, msg) => {
    const op = msg.subject.slice(spec.mount.length + 1);
    void (async () => {
      if (op === '$reports') {
        let sent = 0;
        while (sent < spec.reports && !nc.isClosed()) {
          for (let i = 0; i < 50 && sent < spec.reports; i++, sent++)
            nc.publish(msg.reply, report, { headers: progress });
          await nc.flush();
        }
        msg.respond(done);
        process.stdout.write(`sent ${sent}\n`);
      } else if (op === '$big') {
        await new Promise((resolve) => setTimeout(resolve, spec.delayMs ?? 0));
        msg.respond(big);
      }
    })();
  },
});
await nc.flush();
process.stdout.write('mounted\n');
process.on('SIGTERM', () => void nc.close().then(() => process.exit(0)));
