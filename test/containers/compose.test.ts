/**
 * The compose stack as a user brings it up (scripts/compose.sh: `docker compose up -d --build`,
 * running podman's healthchecks where nothing else does), called from the host, taken down.
 * Beside the machine's own NATS: the stack's ports are free ones, not 4222/8222.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../harness/nats-server.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const project = 'matrix-tool-registry-test';

/** Runs a command to its end, its output in the test log; resolves with its exit code and stdout. */
function run(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(command, args, { cwd: repo, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

/**
 * The host's call as the `agent` of deploy/nats.conf. Once the compose service trusts grant
 * issuers (issue 13), the grant (`MATRIX_GRANT`) and inbox prefix the agent needs go here.
 */
function agentEnv(url: string, password = 'agent-secret'): NodeJS.ProcessEnv {
  return { ...process.env, NATS_URL: url, NATS_USER: 'agent', NATS_PASSWORD: password };
}

describe('docker compose up, as a user runs it', () => {
  let url: string;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    const [nats, monitor] = [await freePort(), await freePort()];
    url = `nats://127.0.0.1:${nats}`;
    env = { ...process.env, COMPOSE_PROJECT_NAME: project, NATS_PORT: String(nats), NATS_MONITOR_PORT: String(monitor) };
    const up = await run('scripts/compose.sh', ['up'], env);
    if (up.code !== 0) throw new Error(`scripts/compose.sh up exited with ${up.code}:\n${up.stdout}\n${up.stderr}`);
  }, 900_000);
  afterAll(async () => {
    const down = await run('scripts/compose.sh', ['down'], env);
    expect(down.code).toBe(0);
  }, 120_000);

  it("reports NATS healthy, in the engine's own view", async () => {
    const { getContainerRuntimeClient } = await import('testcontainers');
    const client = await getContainerRuntimeClient();
    const nats = (await client.container.list()).find(
      (c) => c.Labels['com.docker.compose.project'] === project && c.Labels['com.docker.compose.service'] === 'nats',
    );
    expect(nats, 'the nats service of the stack runs').toBeDefined();
    const inspected = await client.container.inspect(client.container.getById(String(nats?.Id)));
    expect(inspected.State.Health?.Status).toBe('healthy');
  });

  it('calls matrix_introspect through the dispatcher from the host, with the compose credentials', async () => {
    const call = await run(process.execPath, ['dist/src/cli/main.js', 'call', 'matrix_introspect', '--profile', 'default', '--json'], agentEnv(url));
    expect(call.stderr).not.toMatch(/error/i);
    expect(call.code).toBe(0);
    const result = JSON.parse(call.stdout) as { isError: boolean; content: string };
    expect(result.isError).toBe(false);
    const mounts = (JSON.parse(result.content) as { mounts: { mount: string }[] }).mounts.map((m) => m.mount);
    expect(mounts).toEqual(expect.arrayContaining(['system.tools', 'system.dispatcher']));
  });

  it('refuses a caller with a wrong password', async () => {
    const call = await run(process.execPath, ['dist/src/cli/main.js', 'list'], agentEnv(url, 'not-the-password'));
    expect(call.code).not.toBe(0);
    expect(call.stderr).toMatch(/authoriz/i);
  });
});
