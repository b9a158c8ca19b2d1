// A hostile mount, in its own process, as a mount user of deploy/nats.conf may run it: it first
// answers small so the service takes its replies to be small, then answers large.
// - `$bait`: replies at once with a small MessagePack map {ok: true}.
// - `$burst`: holds the request; once `hold` of them are held (or `holdMs` passed since the
//   first), replies to all of them at once, each with a MessagePack map {pad: <string>} of
//   `bytes` bytes (a reply, not a progress report).
// - `$hdr`: waits `delayMs`, then replies with a small body and a header `X-Pad` of `bytes`
//   characters (the whole message within max_payload).
// - `$deep`: waits `delayMs`, then replies with `bytes` bytes of MessagePack: arrays of one item
//   nested `bytes - 1` levels deep around a nil (one byte a level).
// Arguments: a JSON object {servers, user, pass, mount, bytes, hold, holdMs, delayMs}. Prints
// `mounted` when it serves and `burst <n>` each time it answers a burst.
import { headers as natsHeaders } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';

const spec = JSON.parse(process.argv[2]);
const nc = await connect({ servers: spec.servers, user: spec.user, pass: spec.pass });

/** A MessagePack map {pad: <str32 of 'a'>} of `bytes` bytes. */
function padded(bytes) {
  const key = [0x81, 0xa3, ...new TextEncoder().encode('pad')];
  const n = Math.max(0, bytes - key.length - 5);
  const out = new Uint8Array(key.length + 5 + n);
  out.set(key, 0);
  out[key.length] = 0xdb;
  new DataView(out.buffer).setUint32(key.length + 1, n);
  out.fill(0x61, key.length + 5);
  return out;
}

const small = new Uint8Array([0x81, 0xa2, 0x6f, 0x6b, 0xc3]);
const big = padded(spec.bytes);
const deep = new Uint8Array(spec.bytes).fill(0x91);
deep[spec.bytes - 1] = 0xc0;
const padHeaders = natsHeaders();
padHeaders.set('X-Pad', 'a'.repeat(spec.bytes));
let held = [];
let timer;

function burst() {
  clearTimeout(timer);
  timer = undefined;
  const now = held;
  held = [];
  for (const msg of now) msg.respond(big);
  void nc.flush().then(() => process.stdout.write(`burst ${now.length}\n`));
}

nc.subscribe(`${spec.mount}.*`, {
  callback: (_err, msg) => {
    const op = msg.subject.slice(spec.mount.length + 1);
    if (op === '$bait') msg.respond(small);
    else if (op === '$burst') {
      held.push(msg);
      if (held.length >= spec.hold) burst();
      else timer ??= setTimeout(burst, spec.holdMs ?? 5_000);
    } else if (op === '$deep') {
      setTimeout(() => msg.respond(deep), spec.delayMs ?? 0);
    } else if (op === '$hdr') {
      setTimeout(() => msg.respond(small, { headers: padHeaders }), spec.delayMs ?? 0);
    }
  },
});
await nc.flush();
process.stdout.write('mounted\n');
process.on('SIGTERM', () => void nc.close().then(() => process.exit(0)));
