import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedNatsUrl, testConnection } from '../harness/bus.js';
import { contextSpec, type Instance, startInstance, uniqueBucket } from '../harness/registry.js';
import { cli } from '../harness/service.js';

/**
 * A test that runs the CLI several times: each run is a Node process that starts, imports and
 * connects, under a second idle and 5-7 s at load 11 on 2 cores.
 */
const CLI_RUNS_MS = 60_000;

describe('what the CLI says about itself and its failures', () => {
  let url: string;
  let registry: Instance;
  const dir = mkdtempSync(join(tmpdir(), 'cli-messages-'));

  beforeAll(async () => {
    url = sharedNatsUrl();
    registry = await startInstance(await testConnection(), uniqueBucket());
  });
  afterAll(async () => {
    await registry.stop();
  });

  it(
    'mentions in --help only the flags a verb has',
    async () => {
      const call = await cli(url, 'call', '--help');
      expect(call.code).toBe(0);
      expect(call.stdout).toContain('--args <json>');
      expect(call.stdout).not.toContain('--format');
      expect(call.stdout).not.toContain('--strict');
      const resolve = await cli(url, 'resolve', '--help');
      expect(resolve.stdout).toMatch(/--format <format>/);
      expect(resolve.stdout).toMatch(/--strict\s+with --format openai: strict-mode parameters/);
    },
    CLI_RUNS_MS,
  );

  it(
    'says "already exists" when register --expected-revision 0 meets an existing key',
    async () => {
      const key = `cli-exists-${process.pid}`;
      const file = join(dir, 'spec.json');
      writeFileSync(file, JSON.stringify(contextSpec(key)));
      const first = await cli(url, 'register', file, '--expected-revision', '0');
      expect(first.code).toBe(0);
      const revision = /at revision (\d+)/.exec(first.stdout)?.[1];
      const again = await cli(url, 'register', file, '--expected-revision', '0');
      expect(again.code).toBe(1);
      expect(again.stderr).toContain(
        `error (conflict): ${key} already exists at revision ${revision}: expectedRevision 0 registers only a new key`,
      );
      expect((await cli(url, 'unregister', key)).code).toBe(0);
    },
    CLI_RUNS_MS,
  );
});
