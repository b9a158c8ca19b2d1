/** Set-up of every integration and system test file: no process it spawned outlives it (each lane's next file would meet it). */
import { afterAll } from 'vitest';
import { killLeftovers } from './children.js';

afterAll(async () => {
  const killed = await killLeftovers();
  if (killed > 0) process.stderr.write(`harness: killed ${killed} process(es) the file left running\n`);
});
