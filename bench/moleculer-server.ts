/** The Moleculer peer: an `echo.echo` action with parameter validation, over the bench's NATS. */
import { ServiceBroker } from 'moleculer';

const broker = new ServiceBroker({
  nodeID: 'bench-moleculer-server',
  transporter: process.env.NATS_URL,
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
