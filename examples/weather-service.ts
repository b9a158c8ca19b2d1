/**
 * A service that provides a tool: it mounts `app.weather` with one op, `$forecast`, and
 * registers the tool context `weather` while it runs (withdrawing it when it stops).
 *
 *   npm run build && node dist/examples/weather-service.js
 *
 * With deploy/nats.conf it runs as its own user (NATS_USER=weather NATS_PASSWORD=weather-secret),
 * which may answer app.weather's requests and nothing else: the operator registers the context.
 */
import {
  connectBus,
  connectOptionsFromEnv,
  ForbiddenError,
  Mount,
  type ToolContextSpec,
  ToolProvider,
} from '../src/index.js';

const forecastRequest = {
  type: 'object' as const,
  additionalProperties: false,
  required: ['city'],
  properties: {
    city: { type: 'string', minLength: 1, maxLength: 100 },
    days: { type: 'integer', minimum: 1, maximum: 7 },
  },
};

const weather: ToolContextSpec = {
  key: 'weather',
  title: 'Weather',
  description: 'Forecasts for a city.',
  instructions: 'Give the city as the user wrote it. Forecasts beyond 7 days are not available.',
  matrixTools: [
    {
      name: 'weather_forecast',
      description: 'The forecast for a city, day by day.',
      inputSchema: forecastRequest,
      target: 'app.weather',
      op: '$forecast',
      resultMode: 'text',
      timeoutMs: 2_000,
      annotations: { readOnly: true, idempotent: true, openWorld: false },
    },
  ],
  permissions: { approval: 'never' },
  provides: ['weather.forecast'],
};

const nc = await connectBus({ ...connectOptionsFromEnv(), name: 'weather-service' });
const mount = await new Mount(nc, {
  name: 'app.weather',
  version: '1.0.0',
  description: 'Weather forecasts (an example service).',
  ops: {
    $forecast: {
      description: 'Forecast for a city.',
      request: forecastRequest,
      response: { type: 'object' },
      handle: (req: { city: string; days?: number }) => ({
        text: Array.from(
          { length: req.days ?? 3 },
          (_, i) => `${req.city}, day ${i + 1}: ${['sunny', 'cloudy', 'rain'][i % 3]}`,
        ).join('\n'),
      }),
    },
  },
}).start();
const provider = new ToolProvider(nc, [weather]);
let registered: string;
try {
  const [reply] = await provider.start();
  registered = `context weather registered at revision ${reply?.revision}`;
} catch (err) {
  // As its own NATS user of deploy/nats.conf (NATS_USER=weather) a mount only answers: the operator registers.
  if (!(err instanceof ForbiddenError)) throw err;
  registered = 'not permitted to register the context weather (register it as operator)';
}
process.stderr.write(`weather service ready: app.weather mounted, ${registered}\n`);

const stop = async () => {
  await provider.stop();
  await mount.stop();
  await nc.drain();
  process.exit(0);
};
process.once('SIGINT', () => void stop());
process.once('SIGTERM', () => void stop());
