/**
 * Real NATS servers for tests, never a mock: `NATS_URL` when set; else testcontainers'
 * NATS module when a Docker engine answers; else a `nats-server` child process on a free
 * port with JetStream in a temporary directory.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A running server a test may use. */
export interface TestNats {
  /** `nats://host:port`. */
  url: string;
  /** How it runs. */
  kind: 'external' | 'container' | 'process';
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

/** The shared server of a test run, by the rule above. */
export async function startTestNats(): Promise<TestNats> {
  const external = process.env.NATS_URL;
  if (external) return { url: external, kind: 'external', stop: async () => {} };
  if (await dockerAnswers()) {
    const { NatsContainer } = await import('@testcontainers/nats');
    const container = await new NatsContainer('nats:2.10-alpine').withJetStream().start();
    const { servers } = container.getConnectionOptions();
    const url = Array.isArray(servers) ? String(servers[0]) : String(servers);
    return { url: url.startsWith('nats://') ? url : `nats://${url}`, kind: 'container', stop: async () => void (await container.stop()) };
  }
  return startNatsProcess();
}

async function dockerAnswers(): Promise<boolean> {
  if (process.env.TESTCONTAINERS_DISABLED === '1') return false;
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

/** A `nats-server` process on a free loopback port, JetStream on, its own store. */
export async function startNatsProcess(extraArgs: string[] = []): Promise<ProcessNats> {
  const port = await freePort();
  const storeDir = mkdtempSync(join(tmpdir(), 'nats-test-'));
  const args = ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir, ...extraArgs];
  let child: ChildProcess | undefined;
  const launch = async (): Promise<void> => {
    child = spawn(process.env.NATS_SERVER_BIN ?? 'nats-server', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    const failed = new Promise<never>((_, reject) => {
      child?.once('error', (err) => reject(new Error(`cannot run nats-server (install it: apt-get install nats-server): ${err.message}`)));
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
