/**
 * The "done when" path through the built binary, under deploy/nats.conf: the service,
 * a host of its own as the `mcp-host` user with the filesystem and memory servers, an agent that
 * reads a file through `matrix-tools call`, a write that waits in `matrix-tools approvals` and
 * runs once after `approve`, and `matrix-tools mcp servers` that shows both ready.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { connectBus } from '../../src/bus/connect.js';
import { startConsole } from '../../src/console/server.js';
import { eventually } from '../harness/eventually.js';
import { deployConf } from '../harness/nats-conf.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { cli, cliGrant, type ServiceProcess, serveTrusting, startScript } from '../harness/service.js';

const dir = mkdtempSync(join(tmpdir(), 'mcp-host-cli-'));
const files = mkdtempSync(join(tmpdir(), 'mcp-host-cli-files-'));
const modules = fileURLToPath(new URL('../../node_modules/@modelcontextprotocol/', import.meta.url));
const agent = ['--user', 'agent', '--password', 'agent-secret', '--inbox-prefix', '_INBOX_agent'];
const operator = ['--user', 'operator', '--password', 'operator-secret', '--inbox-prefix', '_INBOX_operator'];

describe('matrix-tools mcp-host, mcp servers and mcp accept, as a new user runs them', () => {
  let server: ProcessNats;
  let service: ServiceProcess | undefined;
  let host: ServiceProcess | undefined;
  afterAll(async () => {
    await host?.stop('SIGTERM');
    await service?.stop('SIGTERM');
    await server?.stop();
  });

  it('reads a file, gates a write until approve, and lists both servers ready', async () => {
    server = await startNatsProcess(['-c', deployConf]);
    const seed = join(dir, 'issuer.nk');
    const issuer = (await cli(server.url, 'keys', '--out', seed)).stdout.trim();
    service = await serveTrusting(server.url, issuer);
    writeFileSync(join(files, 'hello.txt'), 'hello from a file');
    const mcpJson = join(dir, 'mcp.json');
    const node = process.execPath;
    writeFileSync(
      mcpJson,
      JSON.stringify({
        mcpServers: {
          fs: { command: node, args: [join(modules, 'server-filesystem/dist/index.js'), files] },
          memory: {
            command: node,
            args: [join(modules, 'server-memory/dist/index.js')],
            env: { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') },
          },
        },
      }),
    );
    host = await startScript(
      'dist/src/cli/main.js',
      server.url,
      'mcp host ready',
      { NATS_USER: 'mcp-host', NATS_PASSWORD: 'mcp-host-secret', NATS_INBOX_PREFIX: '_INBOX_mcp-host' },
      ['mcp-host', '--mcp-servers', mcpJson],
      30_000, // two MCP servers, each a Node start-up, before the ready line
    );
    expect(host.output()).toContain('mcp.fs (ready)');
    expect(host.output()).toContain('mcp.memory (ready)');
    expect(host.output()).not.toMatch(/not registered|no JetStream|not permitted/);

    const mint = (...flags: string[]) => cliGrant(server.url, seed, ...flags);
    const grant = await mint(
      '--principal',
      'agent:alpha',
      '--session',
      's-1',
      '--profile',
      'default',
      '--refs',
      'mcp.fs,mcp.memory',
      '--user',
      'agent',
    );
    const ana = join(dir, 'ana.jwt');
    writeFileSync(
      ana,
      await mint('--principal', 'user:ana', '--session', 'ana', '--profile', 'default', '--approve-tools', '*'),
    );
    const call = (tool: string, args: unknown) =>
      cli(server.url, 'call', tool, '--grant', grant, '--args', JSON.stringify(args), '--timeout', '60000', ...agent);

    const read = await call('fs_read_text_file', { path: join(files, 'hello.txt') });
    expect(read.code, read.stderr).toBe(0);
    expect(read.stdout).toContain('hello from a file');

    const target = join(files, 'written.txt');
    const writing = call('fs_write_file', { path: target, content: 'written once' });
    const listed = await eventually(async () => {
      const out = await cli(server.url, 'approvals', '--grant', ana, '--json', ...operator);
      expect(out.code, out.stderr).toBe(0);
      const approvals = (JSON.parse(out.stdout) as { approvals: Array<{ approvalId: string; tool: string }> })
        .approvals;
      expect(approvals.map((a) => a.tool)).toEqual(['fs_write_file']);
      return approvals[0] as { approvalId: string };
    });
    expect(() => readFileSync(target)).toThrow();
    const approved = await cli(server.url, 'approve', listed.approvalId, '--yes', '--grant', ana, ...operator);
    expect(approved.code, approved.stderr).toBe(0);
    const written = await writing;
    expect(written.code, written.stderr).toBe(0);
    expect(readFileSync(target, 'utf8')).toBe('written once');

    const servers = await cli(server.url, 'mcp', 'servers', ...operator);
    expect(servers.code, servers.stderr).toBe(0);
    expect(servers.stdout).toMatch(/^mcp\.fs\s+ready\s+secure-filesystem-server/m);
    expect(servers.stdout).toMatch(/^mcp\.memory\s+ready\s+memory-server/m);
    const accepted = await cli(server.url, 'mcp', 'accept', 'fs', ...operator);
    expect(accepted.code, accepted.stderr).toBe(0);
    expect(accepted.stdout).toContain('mcp.fs: no held change to accept');
    // The agent may not accept a definition: NATS refuses the publish.
    const asAgent = await cli(server.url, 'mcp', 'accept', 'fs', ...agent);
    expect(asAgent.code).not.toBe(0);

    // The console's MCP servers page as each user: the operator's lists both servers and its
    // Accept reaches mcp.fs.$accept (nothing is held, and it says so); the agent's Accept is
    // refused by NATS, as its `mcp accept` is.
    for (const [user, password] of [
      ['operator', 'operator-secret'],
      ['agent', 'agent-secret'],
    ] as const) {
      const nc = await connectBus({ servers: server.url, user, pass: password, inboxPrefix: `_INBOX_${user}` });
      const running = await startConsole(nc, { port: 0, allowWrites: true, token: 't' });
      try {
        const accept = await fetch(new URL('mcp/accept', running.url), {
          method: 'POST',
          body: new URLSearchParams({ mount: 'mcp.fs', tool: 'write_file', after: '0'.repeat(64), token: 't' }),
          redirect: 'manual',
        });
        const text = await accept.text();
        if (user === 'operator') {
          expect(accept.status).toBe(400);
          expect(text).toContain('mcp.fs holds no change of write_file with the definition shown');
          const listed = await (await fetch(new URL('mcp', running.url))).text();
          expect(listed).toMatch(/data-mcp-server="mcp.fs"[\s\S]*?>ready</);
          expect(listed).toMatch(/data-mcp-server="mcp.memory"[\s\S]*?>ready</);
        } else {
          expect(accept.status).toBe(403);
          expect(text).toContain('not permitted to publish to mcp.fs.$accept');
        }
      } finally {
        await running.close();
        await nc.drain();
      }
    }
  }, 120_000);
});
