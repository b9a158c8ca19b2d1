/**
 * `npm start` as a supervisor and a terminal stop it: SIGTERM to the npm process alone, and a
 * terminal's Ctrl-C, which the service gets twice (from the terminal, and forwarded by npm).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { sharedNatsEnv, sharedNatsUrl } from '../harness/bus.js';
import { tracked } from '../harness/children.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** A process group of its own, alive or not: what a supervisor's stop leaves behind in it. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A spawned process's exit, its stderr so far, and a wait for a line in it. */
function watched(child: ChildProcess) {
  let stderr = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const seen = (text: string) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (!stderr.includes(text)) return;
        child.stderr?.off('data', check);
        resolve();
      };
      child.stderr?.on('data', (d: Buffer) => {
        stderr += d.toString();
        check();
      });
      void exited.then(({ code, signal }) =>
        reject(new Error(`exited (${code ?? signal}) before "${text}": ${stderr}`)),
      );
    });
  return { exited, seen, stderr: () => stderr };
}

describe('npm start', () => {
  const groups: number[] = [];
  afterEach(() => {
    for (const pgid of groups.splice(0)) if (groupAlive(pgid)) process.kill(-pgid, 'SIGKILL');
  });

  it('drains on SIGTERM sent to the npm process alone, and leaves no process behind', async () => {
    const url = sharedNatsUrl();
    // `--ignore-scripts` skips the prestart build alone (npm test has built): a build here would
    // rewrite dist/ under the other files' feet. `start` itself runs as a user's `npm start` does.
    const npm = tracked(
      spawn('npm', ['start', '--ignore-scripts'], {
        cwd: root,
        detached: true,
        env: { ...process.env, ...sharedNatsEnv(url), NATS_URL: url },
        stdio: ['ignore', 'ignore', 'pipe'],
      }),
    );
    const pgid = npm.pid as number;
    groups.push(pgid);
    const run = watched(npm);
    await run.seen(' ready ');

    npm.kill('SIGTERM');

    expect(await run.exited).toEqual({ code: 0, signal: null });
    expect(run.stderr()).toContain('SIGTERM: draining');
    expect(groupAlive(pgid)).toBe(false);
  });

  it('takes a repeat of the stopping signal for the same one, and still drains', async () => {
    // What `serve` does on its signal, alone: says so, then takes its time to stop.
    const script = `
      const { interrupted } = await import(${JSON.stringify(`${root}/dist/src/cli/run.js`)});
      const alive = setInterval(() => undefined, 60_000);
      const stopping = interrupted();
      console.error('listening');
      const signal = await stopping;
      clearInterval(alive);
      console.error(signal + ': draining');
      setTimeout(() => { console.error('drained'); process.exit(0); }, 300);
    `;
    const child = tracked(
      spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'ignore', 'pipe'] }),
    );
    const run = watched(child);
    await run.seen('listening');
    child.kill('SIGINT');
    await run.seen('SIGINT: draining');

    child.kill('SIGINT');

    expect(await run.exited).toEqual({ code: 0, signal: null });
    expect(run.stderr()).toContain('drained');
  });
});
