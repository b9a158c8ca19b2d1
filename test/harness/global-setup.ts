/** Starts the shared NATS server of each lane (see lanes.ts) and hands their URLs and credentials to every test file. */
import type { TestProject } from 'vitest/node';
import { testLanes } from './lanes.js';
import { startTestNats, type TestNats } from './nats-server.js';

/** One lane's server: where it is and the credentials it demands (a NATS container's; none for a process). */
export interface LaneNats {
  url: string;
  user?: string;
  pass?: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    /** The shared server of each lane, by lane index; bus.ts picks this worker's. */
    natsLanes: LaneNats[];
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const started: TestNats[] = [];
  const stop = async (): Promise<void> => void (await Promise.all(started.map((nats) => nats.stop())));
  try {
    for (let lane = 0; lane < testLanes(); lane++) started.push(await startTestNats());
  } catch (err) {
    await stop();
    throw err;
  }
  for (const [lane, nats] of started.entries())
    process.stderr.write(`test NATS (${project.name}, lane ${lane + 1}): ${nats.url} (${nats.kind}: ${nats.reason})\n`);
  project.provide(
    'natsLanes',
    started.map(({ url, user, pass }) => ({
      url,
      ...(user !== undefined && { user }),
      ...(pass !== undefined && { pass }),
    })),
  );
  return stop;
}
