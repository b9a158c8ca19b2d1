import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, describe, expect, it } from 'vitest';
import { sharedNatsUrl } from '../harness/bus.js';
import { deployConf } from '../harness/nats-conf.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { cli, runScript, type ServiceProcess, startScript } from '../harness/service.js';

const dir = mkdtempSync(join(tmpdir(), 'identity-cli-'));
const agent = ['--user', 'agent', '--password', 'agent-secret', '--inbox-prefix', '_INBOX_agent'];

describe("docs/security.md's path: make a key, start with trust, mint a grant, call a tool", () => {
  let server: ProcessNats;
  let service: ServiceProcess | undefined;
  afterAll(async () => {
    await service?.stop('SIGTERM');
    await server?.stop();
  });

  it('calls a tool as the agent with a grant, and not without one', async () => {
    server = await startNatsProcess(['-c', deployConf]);
    const seedFile = join(dir, 'issuer.nk');
    const keys = await cli(server.url, 'keys', '--out', seedFile);
    expect(keys.code).toBe(0);
    const issuer = keys.stdout.trim();
    expect(issuer).toMatch(/^A[A-Z2-7]{55}$/);
    expect(statSync(seedFile).mode & 0o777).toBe(0o600);
    expect(readFileSync(seedFile, 'utf8')).toMatch(/^SA[A-Z2-7]{56}\n$/);
    expect((await cli(server.url, 'keys', '--out', seedFile)).code).toBe(2);

    for (const wrong of ['AXXX', ' , ', issuer.replace(/^A/, 'S')]) {
      const refused = await cli(
        server.url,
        'serve',
        '--trust',
        wrong,
        '--user',
        'service',
        '--password',
        'service-secret',
      );
      expect(refused.code, wrong).toBe(2);
      expect(refused.stderr).toMatch(/^error: --trust \/ MATRIX_TRUSTED_ISSUERS: /);
    }
    service = await startScript(
      'dist/src/cli/main.js',
      server.url,
      ' ready ',
      { NATS_USER: 'service', NATS_PASSWORD: 'service-secret' },
      ['serve', '--trust', issuer],
    );
    expect(service.output()).toContain('identity: grants from 1 issuer(s)');

    const minted = await cli(
      server.url,
      'grant',
      '--issuer',
      seedFile,
      '--principal',
      'agent:alpha',
      '--session',
      'sess-1',
      '--profile',
      'default',
      '--ttl',
      '15m',
      '--user',
      'agent',
    );
    expect(minted.code).toBe(0);
    expect(minted.stderr).toBe('');
    const grant = minted.stdout.trim();

    const called = await cli(
      server.url,
      'call',
      'matrix_introspect',
      '--grant',
      grant,
      '--args',
      '{"mount":"system.tools"}',
      ...agent,
    );
    expect(called.stderr).toMatch(/^trace [0-9a-f]{32} {2}ok/);
    expect(called.code).toBe(0);
    expect(called.stdout).toContain('"mount":"system.tools"');
    const resolved = await cli(server.url, 'resolve', '--grant', grant, '--json', ...agent);
    expect(resolved.code).toBe(0);
    expect(JSON.parse(resolved.stdout).contexts).toEqual(['actor-readonly']);

    const without = await cli(server.url, 'call', 'matrix_introspect', '--profile', 'default', ...agent);
    expect(without.code).toBe(1);
    expect(without.stderr).toContain('error (forbidden): Matrix-Grant is missing');
    const wider = await cli(server.url, 'call', 'matrix_invoke', '--grant', grant, '--profile', 'edit', ...agent);
    expect(wider.code).toBe(1);
    expect(wider.stderr).toContain(
      'error (forbidden): the request asks for other authority than its Matrix-Grant: profile "edit"',
    );
    const asAgent = ['--user', 'agent', '--password', 'agent-secret', '--timeout', '2000'];
    // The grant names its NATS user: the CLI takes that user's inbox prefix from it.
    const fromGrant = await cli(server.url, 'call', 'matrix_introspect', '--grant', grant, ...asAgent);
    expect(fromGrant.code, fromGrant.stderr).toBe(0);
    const noPrefix = await cli(server.url, 'call', 'matrix_introspect', '--profile', 'default', ...asAgent);
    expect(noPrefix.code).toBe(1);
    expect(noPrefix.stderr).toMatch(
      /error \(forbidden\): not permitted to receive replies on _INBOX\..*--inbox-prefix/,
    );

    // The MCP bridge as the agent, its grant in MATRIX_GRANT: tools/list and tools/call under the grant.
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url)), 'mcp'],
      env: {
        ...process.env,
        NATS_URL: server.url,
        NATS_USER: 'agent',
        NATS_PASSWORD: 'agent-secret',
        NATS_INBOX_PREFIX: '_INBOX_agent',
        MATRIX_GRANT: grant,
      } as Record<string, string>,
      stderr: 'ignore',
    });
    const mcp = new Client({ name: 'identity', version: '1.0.0' });
    await mcp.connect(transport);
    expect((await mcp.listTools()).tools.map((t) => t.name)).toEqual(['matrix_introspect', 'session_state_read']);
    const viaMcp = await mcp.callTool({ name: 'session_state_read', arguments: {} });
    expect(viaMcp.isError).toBe(false);
    expect((viaMcp.content as Array<{ text: string }>)[0]?.text).toContain('"session":"sess-1"');
    await mcp.close();
  }, 60_000);
});

describe('the oracle example under a grant (MATRIX_GRANT)', () => {
  const running: ServiceProcess[] = [];
  afterAll(async () => {
    for (const p of running.reverse()) await p.stop('SIGTERM');
  });

  it('resolves and calls with the grant’s authority on a service that trusts its issuer', async () => {
    const url = sharedNatsUrl();
    const seedFile = join(dir, 'oracle-issuer.nk');
    const issuer = (await cli(url, 'keys', '--out', seedFile)).stdout.trim();
    running.push(
      await startScript(
        'dist/src/cli/main.js',
        url,
        ' ready ',
        {
          MATRIX_TOOLS_BUCKET: `idcli-${process.pid}`,
          MATRIX_SESSIONS_BUCKET: `idcli-s-${process.pid}`,
          MATRIX_TRUSTED_ISSUERS: issuer,
        },
        ['serve'],
      ),
    );
    running.push(await startScript('dist/examples/weather-service.js', url, 'weather service ready'));
    const grant = (
      await cli(
        url,
        'grant',
        '--issuer',
        seedFile,
        '--principal',
        'agent:oracle',
        '--session',
        's-1',
        '--profile',
        'default',
        '--requires',
        'weather.forecast',
      )
    ).stdout.trim();
    const withGrant = await runWith({ MATRIX_GRANT: grant }, () => runScript('dist/examples/oracle.js', url));
    expect(withGrant.stderr).toBe('');
    expect(withGrant.code).toBe(0);
    expect(withGrant.stdout).toContain('weather_forecast → isError=false\nLisbon, day 1: sunny');
    const without = await runScript('dist/examples/oracle.js', url);
    expect(without.code).not.toBe(0);
    expect(without.stderr).toContain('Matrix-Grant is missing');
  }, 60_000);
});

/** Runs `fn` with extra environment variables, which child processes it starts inherit. */
async function runWith<T>(env: Record<string, string>, fn: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  try {
    return await fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}
