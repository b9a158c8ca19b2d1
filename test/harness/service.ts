/** Built scripts as a user runs them: `node dist/...` in a child process. */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { sharedNatsEnv } from './bus.js';
import { tracked } from './children.js';

/** A running service process. */
export interface ServiceProcess {
  child: ChildProcess;
  /** Everything it wrote to stderr so far. */
  output(): string;
  /** Sends a signal and resolves with the exit code once it exits. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts the built service (`npm start`'s entry) against `natsUrl`; resolves once it logs that it is ready. */
export function startService(natsUrl: string, env: Record<string, string> = {}): Promise<ServiceProcess> {
  return startScript('dist/src/main.js', natsUrl, ' ready ', env);
}

/** Runs a built script (`dist/...`) to its end; resolves with its exit code and output. */
export function runScript(
  path: string,
  natsUrl: string,
  timeoutMs = 15_000,
  args: string[] = [],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const script = fileURLToPath(new URL(`../../${path}`, import.meta.url));
  const child = tracked(
    spawn(process.execPath, [script, ...args], {
      env: { ...process.env, ...sharedNatsEnv(natsUrl), NATS_URL: natsUrl },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) => {
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Longest wait for a started script to say it is ready, in ms (vitest's hook timeout). */
const READY_WITHIN_MS = 30_000;

/** Starts a built script that stays up, resolving once its stderr contains `ready`. */
export async function startScript(
  path: string,
  natsUrl: string,
  ready: string,
  env: Record<string, string> = {},
  args: string[] = [],
  readyMs = READY_WITHIN_MS,
): Promise<ServiceProcess> {
  const script = fileURLToPath(new URL(`../../${path}`, import.meta.url));
  if (!existsSync(script)) throw new Error(`${script} is missing: run \`npm run build\` (npm test does) first`);
  const child = tracked(
    spawn(process.execPath, [script, ...args], {
      env: { ...process.env, ...sharedNatsEnv(natsUrl), ...env, NATS_URL: natsUrl },
      stdio: ['ignore', 'ignore', 'pipe'],
    }),
  );
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    // A guard against a process that hangs, not a claim about speed: on a busy machine a service
    // over a bucket of 10,000 contexts took more than 10 s to say it was ready.
    const timer = setTimeout(() => reject(new Error(`${path} not ready within ${readyMs} ms: ${stderr}`)), readyMs);
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
      if (stderr.includes(ready)) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then((code) => reject(new Error(`${path} exited with ${code}: ${stderr}`)));
  });
  return {
    child,
    output: () => stderr,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** Runs the CLI (`matrix-tools <args>`) to its end. */
export function cli(
  natsUrl: string,
  ...args: string[]
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runScript('dist/src/cli/main.js', natsUrl, 30_000, args);
}

/** `serve` as deploy/nats.conf's `service` user, trusting the grant issuer `issuer`. */
export function serveTrusting(natsUrl: string, issuer: string): Promise<ServiceProcess> {
  return startScript(
    'dist/src/cli/main.js',
    natsUrl,
    ' ready ',
    { NATS_USER: 'service', NATS_PASSWORD: 'service-secret' },
    ['serve', '--trust', issuer],
  );
}

/** A grant minted by the CLI with the issuer seed at `seed`, valid 15 minutes; throws when `grant` fails. */
export async function cliGrant(natsUrl: string, seed: string, ...flags: string[]): Promise<string> {
  const minted = await cli(natsUrl, 'grant', '--issuer', seed, '--ttl', '15m', ...flags);
  if (minted.code !== 0) throw new Error(`grant failed: ${minted.stderr}`);
  return minted.stdout.trim();
}
