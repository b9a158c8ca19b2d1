/**
 * The echo target of the benchmark, in its own process: a callback responder on `bench.echo.*`,
 * on one connection per account of `BENCH_USERS` (comma-separated; a user's password is its
 * name), else on one connection as `NATS_URL` allows. One process serves every stack's echo,
 * so rows compared across accounts share its cost.
 */
import { connectBus } from '../src/bus/connect.js';

const users = process.env.BENCH_USERS?.split(',') ?? [undefined];
for (const user of users) {
  const nc = await connectBus({ servers: process.env.NATS_URL, name: 'bench-echo', user, pass: user });
  nc.subscribe('bench.echo.*', {
    queue: 'bench-echo',
    callback: (_err, msg) => {
      msg.respond(msg.data);
    },
  });
  await nc.flush();
}
process.stdout.write('ready\n');
process.on('SIGTERM', () => process.exit(0));
