/**
 * A tool that takes a machine's time: it mounts `app.jobs` with one op, `$count`, which counts to
 * `to`, one step every `stepMs`, reporting progress at each step, and stops when its call is
 * cancelled. It registers the tool context `jobs` (tool `count_slowly`) while it runs. With it,
 * every walkthrough of tasks, progress and cancellation runs as written:
 *
 *   npm run build && node dist/examples/long-task-service.js
 *   matrix-tools call count_slowly -a '{"to": 20}' --refs jobs --task   # a task, followed to its end
 *   matrix-tools cancel <task id>                                       # from another terminal
 *
 * With deploy/nats.conf, run it as a mount user of its own (as examples/weather-service.ts is).
 */
import {
  connectBus,
  connectOptionsFromEnv,
  ForbiddenError,
  Mount,
  type OpContext,
  type ToolContextSpec,
  ToolProvider,
} from '../src/index.js';

const countRequest = {
  type: 'object' as const,
  additionalProperties: false,
  required: ['to'],
  properties: {
    to: { type: 'integer', minimum: 1, maximum: 10_000, description: 'The number to count to.' },
    stepMs: {
      type: 'integer',
      minimum: 1,
      maximum: 60_000,
      description: 'Milliseconds between two numbers; default 500.',
    },
  },
};

const jobs: ToolContextSpec = {
  key: 'jobs',
  title: 'Long jobs',
  description: 'A job that takes a while, for trying tasks, progress and cancellation.',
  instructions: 'count_slowly takes to × stepMs milliseconds: run it as a task when that is long.',
  matrixTools: [
    {
      name: 'count_slowly',
      description: 'Counts to a number, one step at a time, reporting progress; stops when cancelled.',
      inputSchema: countRequest,
      target: 'app.jobs',
      op: '$count',
      resultMode: 'json',
      timeoutMs: 600_000,
      annotations: { readOnly: true, idempotent: true, openWorld: false },
      execution: { taskSupport: 'optional' },
    },
  ],
  permissions: { approval: 'never' },
};

/** Resolves after `ms`, or rejects at once when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', stop);
      resolve();
    }, ms);
    const stop = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', stop, { once: true });
  });
}

/** Counts to `to`, a report at each step; a cancelled call stops at the step it is on. */
async function count(req: { to: number; stepMs?: number }, ctx: OpContext): Promise<{ counted: number }> {
  for (let n = 1; n <= req.to; n++) {
    await sleep(req.stepMs ?? 500, ctx.signal);
    ctx.progress(n, req.to, `counted to ${n}`);
  }
  return { counted: req.to };
}

const nc = await connectBus({ ...connectOptionsFromEnv(), name: 'long-task-service' });
const mount = await new Mount(nc, {
  name: 'app.jobs',
  version: '1.0.0',
  description: 'Jobs that take a while (an example service).',
  ops: {
    $count: {
      description: 'Counts to a number, one step at a time, with progress; honours $cancel.',
      request: countRequest,
      response: { type: 'object' },
      handle: (req: { to: number; stepMs?: number }, ctx: OpContext) =>
        count(req, ctx).catch((err: unknown) => {
          if (ctx.signal.aborted) process.stderr.write(`count to ${req.to} cancelled\n`);
          throw err;
        }),
    },
  },
}).start();
const provider = new ToolProvider(nc, [jobs]);
let registered: string;
try {
  const [reply] = await provider.start();
  registered = `context jobs registered at revision ${reply?.revision}`;
} catch (err) {
  // As its own NATS user of deploy/nats.conf a mount only answers: the operator registers.
  if (!(err instanceof ForbiddenError)) throw err;
  registered = 'not permitted to register the context jobs (register it as operator)';
}
process.stderr.write(`long task service ready: app.jobs mounted, ${registered}\n`);

const stop = async () => {
  await provider.stop();
  await mount.stop();
  await nc.drain();
  process.exit(0);
};
process.once('SIGINT', () => void stop());
process.once('SIGTERM', () => void stop());
