/**
 * A mount written for the tests of progress, cancellation and tasks: `$work {steps, stepMs}`
 * reports progress after each step, stops when its signal fires, and counts what it did, so a
 * test can prove that a call ran once, ran again, or was stopped.
 */
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient } from '../../src/bus/client.js';
import { Mount, type OpContext } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import type { IdentityGate } from '../../src/identity/gate.js';
import type { MatrixToolProjection, ToolContextSpec } from '../../src/registry/types.js';
import { TaskRunner, type TaskRunnerOptions } from '../../src/tasks/runner.js';
import { TaskStore } from '../../src/tasks/store.js';
import { tasksMount } from '../../src/tasks/system-tasks.js';
import { testConnection } from './bus.js';
import { staticRegistry, uniqueBucket } from './registry.js';

/** What the slow mount did. */
export interface SlowMount {
  mount: Mount;
  /** `$work` requests that started. */
  started: number;
  /** Of them, those that ran to the end. */
  finished: number;
  /** Of them, those stopped by their signal, with its reason's name (`CancelledError`, `TimeoutError`). */
  stopped: string[];
  /** The `Matrix-Call-Id` of each request, in order. */
  callIds: (string | undefined)[];
  /** Whether each request asked for progress (`Matrix-Progress: 1`), in the same order. */
  asked: boolean[];
  stop(): Promise<void>;
}

const anyObject = { type: 'object' } as const;

/** Starts the slow mount `name` on `nc`. */
export async function startSlowMount(nc: NatsConnection, name: string): Promise<SlowMount> {
  const state: SlowMount = {
    mount: undefined as unknown as Mount,
    started: 0,
    finished: 0,
    stopped: [],
    callIds: [],
    asked: [],
    stop: () => state.mount.stop(),
  };
  state.mount = new Mount(nc, {
    name,
    version: '0.0.1',
    description: 'slow test mount: reports progress, honours cancel',
    ops: {
      $work: {
        description: 'works `steps` steps of `stepMs` each, reporting progress after each',
        request: anyObject,
        response: anyObject,
        handle: async (req: { steps?: number; stepMs?: number }, ctx: OpContext) => {
          state.started++;
          state.callIds.push(ctx.callId);
          state.asked.push(ctx.wantsProgress);
          const steps = req.steps ?? 3;
          const signal = ctx.signal;
          for (let i = 1; i <= steps; i++) {
            const stopped = await sleep(req.stepMs ?? 50, signal);
            if (stopped) {
              state.stopped.push((signal.reason as Error).name);
              throw signal.reason;
            }
            ctx.progress(i, steps, `step ${i} of ${steps}`);
          }
          state.finished++;
          return { done: steps };
        },
      },
      $flood: {
        description: 'sends `reports` progress reports within about `ms`, then answers',
        request: anyObject,
        response: anyObject,
        handle: async (req: { reports?: number; ms?: number }, ctx: OpContext) => {
          const reports = req.reports ?? 100;
          const pause = (req.ms ?? 1_000) / reports;
          for (let i = 1; i <= reports; i++) {
            ctx.progress(i, reports);
            await new Promise((resolve) => setTimeout(resolve, pause));
          }
          return { reports };
        },
      },
    },
  });
  await state.mount.start();
  return state;
}

/** Waits `ms`, or less when `signal` fires; true when it fired. */
function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(false);
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(true);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** A tool `name` on the slow mount `target`'s `$work`, with `extra` over its defaults. */
export function slowTool(
  target: string,
  name: string,
  extra: Partial<MatrixToolProjection> = {},
): MatrixToolProjection {
  return {
    name,
    description: `${name} for tests`,
    inputSchema: { type: 'object' },
    target,
    op: '$work',
    timeoutMs: 30_000,
    ...extra,
  };
}

/** A tool context `key` of one ungated tool, `work`, on the slow mount `target`'s `$work`. */
export function slowContext(key: string, target: string) {
  return {
    key,
    title: `Slow tools (${key})`,
    description: 'a slow tool',
    matrixTools: [
      {
        name: 'work',
        description: 'slow',
        inputSchema: { type: 'object' as const },
        target,
        op: '$work',
        timeoutMs: 30_000,
      },
    ],
    permissions: { approval: 'never' as const },
  };
}

/** A tasks test's bus: its context registered, its slow mount, and system.dispatcher and system.tasks on a bucket of its own. */
export interface TaskBus {
  nc: NatsConnection;
  slow: SlowMount;
  runner: TaskRunner;
  /** A client on `nc` (timeout 10 s unless told). */
  client: BusClient;
  bucket: string;
  /** Stops all of it and destroys the bucket. */
  stop(): Promise<void>;
}

/** Starts a {@link TaskBus}: `spec` in a static registry, the slow mount `slowName`, and the task runner (with `identity` on both mounts when given). */
export async function startTaskBus(
  slowName: string,
  spec: ToolContextSpec,
  options: { identity?: IdentityGate; runner?: TaskRunnerOptions; timeoutMs?: number } = {},
): Promise<TaskBus> {
  const { identity } = options;
  const nc = await testConnection();
  const bucket = uniqueBucket();
  const registry = await staticRegistry(nc, spec);
  const slow = await startSlowMount(nc, slowName);
  const dispatcher = new Dispatcher(nc);
  const runner = new TaskRunner(dispatcher, await TaskStore.open(nc, { bucket }), options.runner).start();
  const mounts = [
    await dispatcherMount(nc, { dispatcher, tasks: runner, identity }).start(),
    await tasksMount(nc, { runner, identity }).start(),
  ];
  const client = new BusClient(nc, { timeoutMs: options.timeoutMs ?? 10_000 });
  return {
    nc,
    slow,
    runner,
    client,
    bucket,
    stop: async () => {
      client.close();
      for (const m of mounts) await m.stop();
      runner.close();
      dispatcher.close();
      await slow.stop();
      await registry.stop();
      await (await new Kvm(nc).open(bucket)).destroy();
    },
  };
}
