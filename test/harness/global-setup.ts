/** Starts the shared NATS server of the run and hands its URL to every test file. */
import type { TestProject } from 'vitest/node';
import { startTestNats } from './nats-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    natsUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const nats = await startTestNats();
  process.stderr.write(`test NATS: ${nats.url} (${nats.kind})\n`);
  project.provide('natsUrl', nats.url);
  return () => nats.stop();
}
