/**
 * The compose stack as a user brings it up (scripts/compose.sh: `docker compose up -d --build`,
 * running podman's healthchecks where nothing else does), called from the host — the service's
 * tools and the filesystem MCP server its MCP host serves from a volume — taken down.
 * Beside the machine's own NATS: the stack's ports are free ones, not 4222/8222.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../harness/eventually.js';
import { freePort } from '../harness/nats-server.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const project = 'matrix-tool-registry-test';

/** Runs a command to its end, its output in the test log; resolves with its exit code and stdout. */
function run(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(command, args, { cwd: repo, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

/** The host's call as an agent user of deploy/nats.conf (`agent` unless told): its own inbox prefix, and its grant when it has one. */
function agentEnv(
  url: string,
  grant: string | undefined,
  password = 'agent-secret',
  user = 'agent',
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NATS_URL: url,
    NATS_USER: user,
    NATS_PASSWORD: password,
    NATS_INBOX_PREFIX: `_INBOX_${user}`,
  };
  delete env.MATRIX_GRANT;
  if (grant !== undefined) env.MATRIX_GRANT = grant;
  return env;
}

describe('docker compose up, as a user runs it: a key, the stack trusting it, a grant, a call', () => {
  let url: string;
  let env: NodeJS.ProcessEnv;
  let grant: string;
  const seed = join(mkdtempSync(join(tmpdir(), 'compose-')), 'issuer.nk');
  /** A grant of agent:compose for `session` of the default profile (and `flags`), bound to NATS user agent. */
  const mint = async (session: string, ...flags: string[]): Promise<string> => {
    const minted = await run(
      process.execPath,
      [
        'dist/src/cli/main.js',
        'grant',
        '--issuer',
        seed,
        '--principal',
        'agent:compose',
        '--session',
        session,
        '--profile',
        'default',
        ...flags,
        '--ttl',
        '15m',
        '--user',
        'agent',
      ],
      process.env,
    );
    if (minted.code !== 0) throw new Error(`grant exited with ${minted.code}: ${minted.stderr}`);
    return minted.stdout.trim();
  };

  beforeAll(async () => {
    // docs/security.md's path: an issuer key, the stack trusting it, a grant minted for one session, bound to its NATS user.
    const key = await run(process.execPath, ['dist/src/cli/main.js', 'keys', '--out', seed], process.env);
    if (key.code !== 0) throw new Error(`keys exited with ${key.code}: ${key.stderr}`);
    grant = await mint('s-compose');
    const [nats, monitor] = [await freePort(), await freePort()];
    url = `nats://127.0.0.1:${nats}`;
    env = {
      ...process.env,
      COMPOSE_PROJECT_NAME: project,
      NATS_PORT: String(nats),
      NATS_MONITOR_PORT: String(monitor),
      MATRIX_TRUSTED_ISSUERS: key.stdout.trim(),
    };
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

  it('calls matrix_introspect through the dispatcher from the host, as the agent with its grant', async () => {
    const call = await run(
      process.execPath,
      ['dist/src/cli/main.js', 'call', 'matrix_introspect', '--json'],
      agentEnv(url, grant),
    );
    expect(call.stderr).not.toMatch(/error/i);
    expect(call.code).toBe(0);
    const result = JSON.parse(call.stdout) as { isError: boolean; content: string };
    expect(result.isError).toBe(false);
    const mounts = (JSON.parse(result.content) as { mounts: { mount: string }[] }).mounts.map((m) => m.mount);
    expect(mounts).toEqual(expect.arrayContaining(['system.tools', 'system.dispatcher']));
  });

  it('calls the filesystem MCP server the stack hosts on its volume (mcp.fs), as the agent with a grant for it', async () => {
    const fsGrant = await mint('s-compose-fs', '--refs', 'mcp.fs');
    // The host registers mcp.fs once its server is up and the service answers: until then, not_found.
    const listed = await eventually(
      async () => {
        const call = await run(
          process.execPath,
          ['dist/src/cli/main.js', 'call', 'fs_list_allowed_directories', '--json'],
          agentEnv(url, fsGrant),
        );
        expect(call.code, call.stderr).toBe(0);
        return JSON.parse(call.stdout) as { isError: boolean; content: string };
      },
      { timeoutMs: 60_000, intervalMs: 1_000 },
    );
    expect(listed.isError).toBe(false);
    expect(listed.content).toContain('/srv/shared');
    // The operator sees it hosted and ready.
    const servers = await run(process.execPath, ['dist/src/cli/main.js', 'mcp', 'servers'], {
      ...agentEnv(url, undefined, 'operator-secret', 'operator'),
    });
    expect(servers.code, servers.stderr).toBe(0);
    expect(servers.stdout).toMatch(/^mcp\.fs\s+ready\s+secure-filesystem-server/m);
  });

  it("refuses agent's grant to agent-2: the stack's NATS attests who sends each request", async () => {
    const call = await run(
      process.execPath,
      ['dist/src/cli/main.js', 'call', 'matrix_introspect'],
      agentEnv(url, grant, 'agent-2-secret', 'agent-2'),
    );
    expect(call.code).not.toBe(0);
    expect(call.stderr).toMatch(/forbidden/);
    expect(call.stderr).toMatch(/bound to NATS user agent of account AGENTS/);
  });

  it('refuses the same call without a grant: the stack trusts grants only', async () => {
    const call = await run(
      process.execPath,
      ['dist/src/cli/main.js', 'call', 'matrix_introspect', '--profile', 'default'],
      agentEnv(url, undefined),
    );
    expect(call.code).not.toBe(0);
    expect(call.stderr).toMatch(/forbidden/);
    expect(call.stderr).toMatch(/grant/i);
  });

  it('refuses a caller with a wrong password', async () => {
    const call = await run(
      process.execPath,
      ['dist/src/cli/main.js', 'list'],
      agentEnv(url, grant, 'not-the-password'),
    );
    expect(call.code).not.toBe(0);
    expect(call.stderr).toMatch(/authoriz/i);
  });
});
