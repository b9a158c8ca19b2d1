/** Starts the shared NATS server of the run and hands its URL and credentials to every test file. */
import type { TestProject } from 'vitest/node';
import { startTestNats } from './nats-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    natsUrl: string;
    /** Credentials the shared server demands (a NATS container's); empty for a process. */
    natsAuth: { user?: string; pass?: string };
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const nats = await startTestNats();
  process.stderr.write(`test NATS: ${nats.url} (${nats.kind}: ${nats.reason})\n`);
  project.provide('natsUrl', nats.url);
  project.provide('natsAuth', { ...(nats.user !== undefined && { user: nats.user }), ...(nats.pass !== undefined && { pass: nats.pass }) });
  return () => nats.stop();
}
