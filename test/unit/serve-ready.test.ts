/**
 * What `serve` says when it starts: its ready line (the mounts, the approval policy it loaded,
 * whom it trusts), and, on a NATS server without JetStream,
 * one line for each part it turns off, each part then answering as the README says. Run
 * in-process against nats-server processes of this file's own.
 */

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAccount } from '@nats-io/nkeys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import type { Logger } from '../../src/bus/log.js';
import { serveConfig } from '../../src/cli/config.js';
import { type ServeHandle, serve } from '../../src/cli/serve.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';

/** A logger that keeps each line, `info …` or `error …`. */
function keptLogger(): Logger & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    info: (message) => lines.push(`info ${message}`),
    error: (message) => lines.push(`error ${message}`),
  };
}

describe('serve without JetStream', () => {
  let nats: ProcessNats;
  let served: ServeHandle;
  let client: BusClient;
  const logger = keptLogger();

  beforeAll(async () => {
    nats = await startNatsProcess([], { jetstream: false });
    served = await serve(serveConfig({ server: nats.url }, {}), logger);
    client = new BusClient(await connectBus({ servers: nats.url }), { timeoutMs: 10_000 });
  });
  afterAll(async () => {
    client?.close();
    await client?.nc.drain();
    await served?.stop();
    await nats?.stop();
  });

  it('says in one line each what it turns off, and names only the mounts it runs', () => {
    const errors = logger.lines.filter((l) => l.startsWith('error '));
    for (const off of [
      'serving the built-in contexts only, registration off',
      'tasks off',
      'system.traces answers from memory only',
      'system.approvals not mounted (gated calls are refused)',
      'system.sessions not mounted',
    ])
      expect(
        errors.some((l) => l.startsWith(`error ${off}`)),
        off,
      ).toBe(true);
    expect(logger.lines.find((l) => l.includes(' ready on '))).toMatch(
      /^info system\.tools, system\.dispatcher, system\.agents, system\.traces, system\.packages ready on /,
    );
  });

  it('with trusted issuers, says revocation is off too', async () => {
    const trusting = keptLogger();
    const issuer = createAccount().getPublicKey();
    const flags = { server: nats.url, trust: issuer, dispatcher: false, reference: false };
    const handle = await serve(serveConfig(flags, {}), trusting);
    await handle.stop();
    expect(trusting.lines).toContainEqual(
      expect.stringMatching(/^error grant revocations unavailable \(no \$revoke\)/),
    );
  });

  it('answers $register unavailable, a task unavailable and a gated call approval_denied', async () => {
    const spec = { key: 'no-js', title: 'x', description: 'x', permissions: { approval: 'never' } };
    await expect(client.request('system.tools', '$register', { spec })).rejects.toMatchObject({ code: 'unavailable' });
    const call = (name: string, args: unknown, extra = {}) =>
      client.request<ToolResult | { task: unknown }>('system.dispatcher', '$call', {
        session: { profile: name === 'matrix_invoke' ? 'edit' : 'default' },
        call: { id: `c-${name}`, name, arguments: args },
        ...extra,
      });
    expect(await call('matrix_introspect', {}, { task: {} })).toMatchObject({
      isError: true,
      error: { code: 'unavailable' },
    });
    expect(await call('matrix_invoke', { target: 'system.agents', op: '$introspect', args: {} })).toMatchObject({
      isError: true,
      error: { code: 'approval_denied' },
    });
    expect(await call('matrix_introspect', {})).toMatchObject({ isError: false });
  });
});

describe('the ready line', () => {
  let nats: ProcessNats;
  const dir = mkdtempSync(join(tmpdir(), 'serve-ready-'));
  /** The ready line of a `serve` with these flags, which is then stopped. */
  const readyLine = async (flags: Record<string, unknown>) => {
    const logger = keptLogger();
    const handle = await serve(serveConfig({ server: nats.url, ...flags }, {}), logger);
    await handle.stop();
    return logger.lines.find((l) => l.includes(' ready on ')) ?? '';
  };

  beforeAll(async () => {
    nats = await startNatsProcess();
  });
  afterAll(async () => {
    await nats?.stop();
  });

  it('says the default policy and development mode when given neither', async () => {
    expect(await readyLine({})).toMatch(
      /; approvals: default policy \(ask a person for every gated call\); identity: trusting callers \(development\); nats-server /,
    );
  });

  it('names the policy file, its rules and default, and each trusted issuer', async () => {
    const policy = join(dir, 'policy.json');
    writeFileSync(
      policy,
      JSON.stringify({ rules: [{ tool: 'matrix_invoke', op: '$read', decision: 'allow' }], default: 'deny' }),
    );
    const [a, b] = [createAccount().getPublicKey(), createAccount().getPublicKey()];
    expect(await readyLine({ policy, trust: `${a},${b}` })).toMatch(
      new RegExp(
        `; approvals: policy ${policy} \\(1 rule, default deny\\); identity: grants from 2 issuer\\(s\\): ${a}, ${b}; nats-server `,
      ),
    );
  });

  it('says nothing of a policy where it does not mount system.approvals', async () => {
    expect(await readyLine({ reference: false })).not.toContain('approvals:');
  });
});
