/**
 * Where the built CLI looked when nothing answers: against a port nobody listens on and against
 * a NATS server that runs no registry, the bridge (as the MCP Inspector starts it, the server
 * given by the environment alone) and a verb given flags each name the NATS URL and the user they
 * used, and where each came from.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tracked } from '../harness/children.js';
import { freePort, type ProcessNats, startNatsProcess } from '../harness/nats-server.js';

const main = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

/** Runs the built CLI with `env` over a clean NATS environment; stdin closed at once. */
function cli(env: Record<string, string>, ...args: string[]): Promise<{ code: number | null; stderr: string }> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(NATS_|MATRIX_)/.test(k)));
  const child = tracked(spawn(process.execPath, [main, ...args], { env: { ...clean, ...env }, stdio: 'pipe' }));
  child.stdin?.end();
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return new Promise((resolve) => {
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

describe('the built CLI, when nothing answers, says where it looked', () => {
  let bare: ProcessNats;

  beforeAll(async () => {
    bare = await startNatsProcess();
  });
  afterAll(async () => {
    await bare?.stop();
  });

  it('names the URL and user of a NATS nobody listens on, from the environment or from flags', async () => {
    const url = `nats://127.0.0.1:${await freePort()}`;
    const bridge = await cli({ NATS_URL: url, NATS_USER: 'ana', NATS_PASSWORD: 'x' }, 'mcp', '--profile', 'default');
    expect(bridge.code).toBe(3);
    expect(bridge.stderr).toContain(`cannot reach NATS at ${url} (from NATS_URL) as user ana (from NATS_USER)`);
    const verb = await cli({}, 'resolve', '--profile', 'default', '--server', url, '--user', 'bob', '--password', 'x');
    expect(verb.code).toBe(3);
    expect(verb.stderr).toContain(`cannot reach NATS at ${url} (from --server) as user bob (from --user)`);
  });

  it('names them beside "no responders" when the server runs no registry', async () => {
    const bridge = await cli({ NATS_URL: bare.url }, 'mcp', '--profile', 'default');
    expect(bridge.code).toBe(3);
    expect(bridge.stderr).toContain('no responders for system.tools.$resolve');
    expect(bridge.stderr).toContain(
      `asked on NATS at ${bare.url} (from NATS_URL) as no user (neither --user nor NATS_USER is set)`,
    );
    const defaulted = await cli({}, 'list', '--server', bare.url, '--user', 'carol', '--password', 'x');
    expect(defaulted.code).toBe(3);
    expect(defaulted.stderr).toContain(`asked on NATS at ${bare.url} (from --server) as user carol (from --user)`);
  });
});
