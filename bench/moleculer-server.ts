/** The Moleculer peer: an `echo.echo` action with parameter validation, over the bench's NATS. */
import { ServiceBroker } from 'moleculer';
import { withUser } from './stack.js';

const broker = new ServiceBroker({
  nodeID: 'bench-moleculer-server',
  // Moleculer reads the user from the URL only (its `user` option is overwritten by the URL's).
  transporter: withUser(String(process.env.NATS_URL), process.env.NATS_USER, process.env.NATS_PASSWORD),
  logger: false,
  validator: true,
});
broker.createService({
  name: 'echo',
  actions: {
    echo: {
      params: { q: { type: 'string', min: 1 } },
      handler: (ctx: { params: unknown }) => ctx.params,
    },
  },
});
await broker.start();
process.stdout.write('ready\n');
process.on('SIGTERM', () => void broker.stop().then(() => process.exit(0)));
