/** A mount script of test/harness (a `.mjs` taking one JSON argument) run in a process of its own. */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { tracked } from './children.js';
import { eventually } from './eventually.js';

/** The running mount: what it printed so far, and how to stop it. */
export interface MountProcess {
  out(): string;
  stop(): void;
}

/** Starts `test/harness/<script>` with `spec` and waits until it prints `mounted`. */
export async function startMountProcess(script: string, spec: Record<string, unknown>): Promise<MountProcess> {
  const path = fileURLToPath(new URL(`./${script}`, import.meta.url));
  const child = tracked(
    spawn(process.execPath, [path, JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'inherit'] }),
  );
  let out = '';
  child.stdout.on('data', (chunk) => (out += chunk));
  await eventually(() => expect(out).toContain('mounted'), { timeoutMs: 10_000 });
  return { out: () => out, stop: () => child.kill('SIGTERM') };
}
