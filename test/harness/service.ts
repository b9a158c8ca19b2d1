/** The service as a user runs it: `node dist/src/main.js` in a child process. */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const entry = fileURLToPath(new URL('../../dist/src/main.js', import.meta.url));

/** A running service process. */
export interface ServiceProcess {
  child: ChildProcess;
  /** Everything it wrote to stderr so far. */
  output(): string;
  /** Sends a signal and resolves with the exit code once it exits. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts the built service against `natsUrl` and resolves once it logs that it is ready. */
export async function startService(natsUrl: string, env: Record<string, string> = {}): Promise<ServiceProcess> {
  if (!existsSync(entry)) throw new Error(`${entry} is missing: run \`npm run build\` (npm test does) first`);
  const child = spawn(process.execPath, [entry], { env: { ...process.env, ...env, NATS_URL: natsUrl }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`service not ready within 10 s: ${stderr}`)), 10_000);
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
      if (stderr.includes(' ready ')) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`service exited with ${code}: ${stderr}`));
    });
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
