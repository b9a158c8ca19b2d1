/** Every process the harness spawns, so that none outlives the test file that started it. */
import type { ChildProcess } from 'node:child_process';

const live = new Set<ChildProcess>();

/** Remembers `child` until it exits; `killLeftovers` kills it if the file ends first. */
export function tracked<T extends ChildProcess>(child: T): T {
  if (child.exitCode !== null || child.signalCode !== null) return child;
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

/**
 * SIGKILLs every tracked process still running and waits for each to exit; says how many the
 * file left running without having signalled them itself.
 */
export async function killLeftovers(): Promise<number> {
  const running = [...live].filter((c) => c.exitCode === null && c.signalCode === null && c.pid !== undefined);
  const left = running.filter((c) => !c.killed);
  await Promise.all(
    running.map(
      (c) =>
        new Promise<void>((resolve) => {
          c.once('exit', () => resolve());
          if (!c.kill('SIGKILL')) resolve();
        }),
    ),
  );
  live.clear();
  return left.length;
}
