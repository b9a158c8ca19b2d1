/** The echo target of the benchmark, in its own process: a callback responder on `bench.echo.*`. */
import { connectBus } from '../src/bus/connect.js';

const nc = await connectBus({ servers: process.env.NATS_URL, name: 'bench-echo' });
nc.subscribe('bench.echo.*', {
  queue: 'bench-echo',
  callback: (_err, msg) => {
    msg.respond(msg.data);
  },
});
await nc.flush();
process.stdout.write('ready\n');
process.on('SIGTERM', () => void nc.drain().then(() => process.exit(0)));
