/**
 * A person approves as who the identity provider says (PROTOCOL 14, 8): `serve --trust-oidc`,
 * an agent's call that waits for a person, and `matrix-tools approvals` / `approve` with
 * `--token-file` (the person's access token, sent as Matrix-Grant): `by` is the token's
 * principal, and a token whose rule gives no approve rights may not answer.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { CallEvent } from '../../src/audit/events.js';
import { watchCalls } from '../../src/audit/log.js';
import { connectBus } from '../../src/bus/connect.js';
import { eventually } from '../harness/eventually.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { startIdp, type TestIdp } from '../harness/oidc.js';
import { cli, type ServiceProcess, startScript } from '../harness/service.js';

const RESOURCE = 'https://bus.example/';
const dir = mkdtempSync(join(tmpdir(), 'approvals-oidc-'));

describe('approving with an IdP token (--token-file)', () => {
  let server: ProcessNats;
  let idp: TestIdp;
  let service: ServiceProcess | undefined;
  afterAll(async () => {
    await service?.stop('SIGTERM');
    await idp?.stop();
    await server?.stop();
  });

  it("lists and approves a waiting call as the token's principal; approvedBy is that principal", async () => {
    server = await startNatsProcess();
    idp = await startIdp({
      resources: [RESOURCE],
      clients: [
        { id: 'alpha', claims: { groups: ['agents'] } },
        { id: 'ana', claims: { groups: ['approvers'] } },
        { id: 'bob', claims: { groups: ['people'] } },
      ],
    });
    const mapping = join(dir, 'mapping.json');
    writeFileSync(
      mapping,
      JSON.stringify({
        principal: { claim: 'client_id', prefix: 'user:' },
        rules: [
          { when: { groups: 'agents' }, profile: 'edit' },
          { when: { groups: 'approvers' }, profile: 'default', role: 'approver', approve: { tools: ['*'] } },
          { when: { groups: 'people' }, profile: 'default' },
        ],
      }),
    );
    const policy = join(dir, 'policy.json');
    writeFileSync(policy, JSON.stringify({ default: 'ask' }));
    service = await startScript(
      'dist/src/cli/main.js',
      server.url,
      ' ready ',
      { MATRIX_TRUSTED_OIDC_ISSUERS: idp.issuer, MATRIX_OIDC_AUDIENCE: RESOURCE, MATRIX_OIDC_MAPPING: mapping },
      ['serve', '--policy', policy],
    );
    const ana = join(dir, 'ana.jwt');
    writeFileSync(ana, await idp.token('ana'));
    const bob = join(dir, 'bob.jwt');
    writeFileSync(bob, await idp.token('bob'));

    const args = { target: 'system.agents', op: '$introspect', args: { mount: 'system.tools' } };
    // The agent calls with the CLI, its token as the grant; the profile is the flags' to say.
    const watcher = await connectBus({ servers: server.url });
    const events: CallEvent[] = [];
    const stopWatching = watchCalls(watcher, (e) => void events.push(e));
    await watcher.flush();
    const agentToken = await idp.token('alpha');
    const noProfile = await cli(server.url, 'call', 'matrix_invoke', '--grant', agentToken);
    expect(noProfile.code).toBe(2);
    expect(noProfile.stderr).toContain('--profile is required with an access token as --grant');
    const calling = cli(
      server.url,
      'call',
      'matrix_invoke',
      '--grant',
      agentToken,
      '--profile',
      'edit',
      '--args',
      JSON.stringify(args),
      '--timeout',
      '60000',
      '--json',
    );
    const listed = await eventually(async () => {
      const out = await cli(server.url, 'approvals', '--token-file', ana, '--json');
      expect(out.code, out.stderr).toBe(0);
      const approvals = (JSON.parse(out.stdout) as { approvals: Array<Record<string, unknown>> }).approvals;
      expect(approvals).toHaveLength(1);
      return approvals[0] as { approvalId: string; principal: string };
    });
    expect(listed.principal).toBe('user:alpha');

    // A token whose rule gives no approve rights: forbidden. Both --grant and --token-file: usage.
    const asBob = await cli(server.url, 'approve', listed.approvalId, '--yes', '--token-file', bob);
    expect(asBob.code).toBe(1);
    expect(asBob.stderr).toContain('error (forbidden)');
    const both = await cli(server.url, 'approve', listed.approvalId, '--yes', '--token-file', ana, '--grant', bob);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--grant or --token-file, not both');

    const approved = await cli(server.url, 'approve', listed.approvalId, '--yes', '--token-file', ana);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toMatch(new RegExp(`^approved ${listed.approvalId} as user:ana at `));
    const called = await calling;
    expect(called.code, called.stderr).toBe(0);
    expect(called.stdout).toContain('system.tools');
    // The audit event names the IdP's principals: who called, and who approved.
    await eventually(() =>
      expect(events.find((e) => e.approvedBy !== undefined)).toMatchObject({
        principal: 'user:alpha',
        approvedBy: 'user:ana',
      }),
    );
    stopWatching();
    await watcher.close();
  }, 120_000);
});
