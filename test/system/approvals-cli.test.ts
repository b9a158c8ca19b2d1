/**
 * The approvals path of the README and docs/approvals-and-tasks.md through the built binary,
 * under deploy/nats.conf: a service that trusts an issuer and asks for every gated call, an
 * agent whose matrix_invoke waits, and a person (the operator user, with ana's approver grant)
 * who lists it and approves it.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import { eventually } from '../harness/eventually.js';
import { deployConf } from '../harness/nats-conf.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { cli, type ServiceProcess, startScript } from '../harness/service.js';

const dir = mkdtempSync(join(tmpdir(), 'approvals-cli-'));
const agent = ['--user', 'agent', '--password', 'agent-secret', '--inbox-prefix', '_INBOX_agent'];
const operator = ['--user', 'operator', '--password', 'operator-secret', '--inbox-prefix', '_INBOX_operator'];

describe('matrix-tools approvals / approve / reject, as a new user runs them', () => {
  let server: ProcessNats;
  let service: ServiceProcess | undefined;
  afterAll(async () => {
    await service?.stop('SIGTERM');
    await server?.stop();
  });

  it('lists a waiting call with its arguments, approves it once, and the agent may not answer', async () => {
    server = await startNatsProcess(['-c', deployConf]);
    const seed = join(dir, 'issuer.nk');
    const issuer = (await cli(server.url, 'keys', '--out', seed)).stdout.trim();
    const policy = join(dir, 'policy.json');
    writeFileSync(policy, JSON.stringify({ default: 'ask' }));
    service = await startScript(
      'dist/src/cli/main.js',
      server.url,
      ' ready ',
      { NATS_USER: 'service', NATS_PASSWORD: 'service-secret' },
      ['serve', '--trust', issuer, '--policy', policy],
    );
    const mint = async (...flags: string[]) => {
      const minted = await cli(server.url, 'grant', '--issuer', seed, '--ttl', '15m', ...flags);
      expect(minted.code, minted.stderr).toBe(0);
      return minted.stdout.trim();
    };
    const agentGrant = await mint(
      '--principal',
      'agent:alpha',
      '--session',
      's-1',
      '--profile',
      'edit',
      '--user',
      'agent',
    );
    const ana = join(dir, 'ana.jwt');
    writeFileSync(
      ana,
      await mint('--principal', 'user:ana', '--session', 'ana', '--profile', 'default', '--approve-tools', '*'),
    );
    const noApprove = await mint('--principal', 'user:bob', '--session', 'bob', '--profile', 'default');

    const args = { target: 'system.agents', op: '$introspect', args: { mount: 'system.tools' } };
    const calling = cli(
      server.url,
      'call',
      'matrix_invoke',
      '--grant',
      agentGrant,
      '--args',
      JSON.stringify(args),
      '--timeout',
      '60000',
      ...agent,
    );
    const listed = await eventually(async () => {
      const out = await cli(server.url, 'approvals', '--grant', ana, '--json', ...operator);
      expect(out.code, out.stderr).toBe(0);
      const approvals = (JSON.parse(out.stdout) as { approvals: Array<Record<string, unknown>> }).approvals;
      expect(approvals).toHaveLength(1);
      return approvals[0] as { approvalId: string; arguments: unknown; principal: string };
    });
    expect(listed).toMatchObject({ arguments: args, principal: 'agent:alpha' });
    const shown = await cli(server.url, 'approvals', '--grant', ana, ...operator);
    expect(shown.stdout).toMatch(/^ID\s+TOOL\s+TARGET\s+PRINCIPAL\s+SESSION\s+LEFT\s+ARGUMENTS$/m);
    expect(shown.stdout).toContain(`${listed.approvalId}  matrix_invoke`);

    // Without an approve claim: forbidden. As the agent user: NATS itself refuses the publish.
    const bob = await cli(server.url, 'approve', listed.approvalId, '--yes', '--grant', noApprove, ...operator);
    expect(bob.code).toBe(1);
    expect(bob.stderr).toContain('error (forbidden)');
    const asAgent = await cli(server.url, 'approve', listed.approvalId, '--yes', '--grant', ana, ...agent);
    expect(asAgent.code).not.toBe(0);
    // approve reads the approval first ($pending), so NATS refuses that publish already.
    expect(asAgent.stderr).toMatch(/not permitted to publish to system\.approvals\.\$(pending|answer)/);
    const agentBus = new BusClient(
      await connectBus({ servers: server.url, user: 'agent', pass: 'agent-secret', inboxPrefix: '_INBOX_agent' }),
      {
        timeoutMs: 3_000,
      },
    );
    await expect(agentBus.request('system.approvals', '$pending', {})).rejects.toMatchObject({ code: 'forbidden' });
    agentBus.close();
    await agentBus.nc.close();

    const approved = await cli(server.url, 'approve', listed.approvalId, '--yes', '--grant', ana, ...operator);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toMatch(new RegExp(`^approved ${listed.approvalId} as user:ana at `));
    const called = await calling;
    expect(called.code, called.stderr).toBe(0);
    expect(called.stdout).toContain('"mount":"system.tools"');
    const again = await cli(
      server.url,
      'reject',
      listed.approvalId,
      '--reason',
      'too late',
      '--grant',
      ana,
      ...operator,
    );
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/error \((conflict|not_found)\)/);
  }, 90_000); // a dozen processes of the built CLI, each a Node start-up on a shared machine
});
