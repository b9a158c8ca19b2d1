/**
 * Real NATS servers for tests, never a mock: `NATS_URL` when set; else testcontainers'
 * NATS module when a container engine answers; else a `nats-server` child process on a free
 * port with JetStream in a temporary directory.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tracked } from './children.js';
import { ContainerUnavailableError, DEFAULT_NATS_IMAGE, startNatsContainer } from './nats-container.js';
import { NatsVersion, natsTool } from './nats-tools.js';

/** A running server a test may use. */
export interface TestNats {
  /** `nats://host:port`. */
  url: string;
  /** Credentials it demands, if any (the NATS container's are `test`/`test`). */
  user?: string;
  pass?: string;
  /** How it runs. */
  kind: 'external' | 'container' | 'process';
  /** Why this kind, in words for the test output (why not a container, say). */
  reason: string;
  /** Stops it (and removes its store); a no-op for an external server. */
  stop(): Promise<void>;
}

/** A server the test controls: it can stop and start it again on the same port and store. */
export interface ProcessNats extends TestNats {
  kind: 'process';
  port: number;
  /** Its process id while it runs. */
  readonly pid: number | undefined;
  /** Kills the process (SIGKILL), keeping its store. */
  kill(): Promise<void>;
  /** Starts it again after `kill()`. */
  restart(): Promise<void>;
}

/** `MATRIX_TEST_NATS`: `container` demands one (CI's container tier), `process` never tries one. */
export type TestNatsMode = 'auto' | 'container' | 'process';

/**
 * The shared server of a test run: `NATS_URL` when set; else a NATS container when an engine
 * answers and the image can be had; else a `nats-server` process. A half-there engine (no Ryuk
 * image, no registry to pull from) falls back to the process, unless the mode demands a container.
 */
export async function startTestNats(env: NodeJS.ProcessEnv = process.env): Promise<TestNats> {
  if (env.NATS_URL) return externalNats(env);
  const mode = testNatsMode(env.MATRIX_TEST_NATS);
  if (mode === 'process') return { ...(await startNatsProcess()), reason: 'MATRIX_TEST_NATS=process' };
  try {
    const container = await startNatsContainer(env.NATS_IMAGE || DEFAULT_NATS_IMAGE);
    return { ...container, kind: 'container', reason: `image ${env.NATS_IMAGE || DEFAULT_NATS_IMAGE}` };
  } catch (err) {
    if (mode === 'container' || !(err instanceof ContainerUnavailableError)) throw err;
    return { ...(await startNatsProcess()), reason: err.message };
  }
}

function externalNats(env: NodeJS.ProcessEnv): TestNats {
  return {
    url: String(env.NATS_URL),
    ...(env.NATS_USER && { user: env.NATS_USER }),
    ...(env.NATS_PASSWORD && { pass: env.NATS_PASSWORD }),
    kind: 'external',
    reason: 'NATS_URL',
    stop: async () => {},
  };
}

function testNatsMode(value: string | undefined): TestNatsMode {
  if (value === undefined || value === '' || value === 'auto') return 'auto';
  if (value === 'container' || value === 'process') return value;
  throw new Error(`MATRIX_TEST_NATS must be auto, container or process, not ${JSON.stringify(value)}`);
}

/**
 * The nats-server a test runs unless told: `NATS_SERVER_BIN`, else the newest release the project
 * tests (built once by scripts/nats.sh; .ci/run runs the integration tier again on the oldest).
 */
export function natsServerBin(env: NodeJS.ProcessEnv = process.env): string {
  return env.NATS_SERVER_BIN || natsTool('server', NatsVersion.newest);
}

/**
 * A `nats-server` process on a loopback port (`atPort`, default a free one: another server's after
 * it was killed stands in for it), JetStream on with its own store unless `jetstream: false`; `bin`
 * is the server to run (default `natsServerBin()`); `env`, variables of its environment (a
 * config's `$NAME` reads them).
 */
export async function startNatsProcess(
  extraArgs: string[] = [],
  {
    jetstream = true,
    bin = natsServerBin(),
    atPort,
    env,
  }: { jetstream?: boolean; bin?: string; atPort?: number; env?: Record<string, string> } = {},
): Promise<ProcessNats> {
  const port = atPort ?? (await freePort());
  const storeDir = mkdtempSync(join(tmpdir(), 'nats-test-'));
  const args = ['-a', '127.0.0.1', '-p', String(port), ...(jetstream ? ['-js', '-sd', storeDir] : []), ...extraArgs];
  let child: ChildProcess | undefined;
  const launch = async (): Promise<void> => {
    child = tracked(spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } }));
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    const failed = new Promise<never>((_, reject) => {
      child?.once('error', (err) =>
        reject(new Error(`cannot run ${bin} (build one: scripts/nats.sh server newest): ${err.message}`)),
      );
      child?.once('exit', (code) => reject(new Error(`nats-server exited with ${code}: ${stderr}`)));
    });
    await Promise.race([waitForPort(port), failed]);
  };
  const kill = async (): Promise<void> => {
    const c = child;
    if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((resolve) => c.once('exit', resolve));
    c.kill('SIGKILL');
    await exited;
  };
  await launch();
  return {
    url: `nats://127.0.0.1:${port}`,
    kind: 'process',
    reason: 'started by the test',
    port,
    get pid() {
      return child?.pid;
    },
    kill,
    restart: launch,
    stop: async () => {
      await kill();
      rmSync(storeDir, { recursive: true, force: true });
    },
  };
}

/** A TCP port nobody listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

async function waitForPort(port: number, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = tcpConnect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() > until) throw new Error(`nats-server did not listen on ${port} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
