/**
 * `approvals`, `approve`, `reject` and `grant --approve-*`, run in-process against `serve()` on a
 * NATS server of this file's own: what each prints and returns.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PendingApproval } from '../../src/approvals/types.js';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import { silentLogger } from '../../src/bus/log.js';
import { approvals, approve, detail, left, reject } from '../../src/cli/approvals.js';
import { serveConfig } from '../../src/cli/config.js';
import { approveClaim } from '../../src/cli/grant.js';
import { ExitCode, UsageError } from '../../src/cli/output.js';
import { runVerb } from '../../src/cli/run.js';
import { type ServeHandle, serve } from '../../src/cli/serve.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { memoryOutput } from '../harness/cli.js';
import { eventually } from '../harness/eventually.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';

describe('the approvals verbs', () => {
  let nats: ProcessNats;
  let served: ServeHandle;
  let agent: BusClient;
  const run = async (verb: Parameters<typeof runVerb>[0], args: Record<string, unknown> = {}) => {
    const out = memoryOutput();
    const code = await runVerb(verb, { server: nats.url, ...args }, out, {});
    return { code, out };
  };
  let n = 0;
  /** A matrix_invoke of agent:alpha, waiting for approval; its result once answered. */
  const gatedCall = (args: Record<string, unknown> = {}): { callId: string; result: Promise<ToolResult> } => {
    const callId = `cli-${n++}`;
    const result = agent.request<ToolResult>(
      'system.dispatcher',
      '$call',
      {
        session: { profile: 'edit' },
        call: {
          id: callId,
          name: 'matrix_invoke',
          arguments: { target: 'system.agents', op: '$introspect', args },
        },
      },
      { principal: 'agent:alpha', session: 's-cli', timeoutMs: 20_000 },
    );
    return { callId, result };
  };
  const idOf = async (callId: string) =>
    eventually(async () => {
      const listed = JSON.parse((await run(approvals, { json: true })).out.stdout) as {
        approvals: Array<{ approvalId: string; callId: string }>;
      };
      const found = listed.approvals.find((a) => a.callId === callId);
      if (found === undefined) throw new Error(`${callId} not listed yet`);
      return found.approvalId;
    });

  beforeAll(async () => {
    nats = await startNatsProcess();
    served = await serve(serveConfig({ server: nats.url }, {}), silentLogger);
    agent = new BusClient(await connectBus({ servers: nats.url }));
  });
  afterAll(async () => {
    agent?.close();
    await agent?.nc.drain();
    await served?.stop();
    await nats?.stop();
  });

  it('approvals prints a table of what waits, with who asks and its arguments; approve lets it run', async () => {
    const { callId, result } = gatedCall();
    const id = await idOf(callId);
    const { code, out } = await run(approvals);
    expect(code).toBe(ExitCode.Ok);
    expect(out.printed[0]).toMatch(/^ID\s+TOOL\s+TARGET\s+PRINCIPAL\s+SESSION\s+LEFT\s+ARGUMENTS\n/);
    expect(out.stdout).toMatch(
      new RegExp(
        `${id}\\s+matrix_invoke\\s+system\\.agents \\$introspect\\s+agent:alpha\\s+s-cli\\s+\\d+s\\s+\\{"target":"system\\.agents","op":"\\$introspect"`,
      ),
    );
    const answered = await run(approve, { id, principal: 'user:ana', yes: true });
    expect(answered.code).toBe(ExitCode.Ok);
    expect(answered.out.stdout).toMatch(new RegExp(`^approved ${id} as anonymous at \\d{4}-`));
    expect((await result).isError).toBe(false);
  });

  it('approvals <id> prints the whole arguments as indented JSON, escaped, with the digest', async () => {
    const far = { note: `routine ${'x'.repeat(80)}`, path: '/', file: 'report\u202efdp.exe' };
    const { callId, result } = gatedCall(far);
    const id = await idOf(callId);
    const { code, out } = await run(approvals, { id });
    expect(code).toBe(ExitCode.Ok);
    expect(out.stdout).toContain(`approval   ${id}`);
    expect(out.stdout).toContain('call       matrix_invoke → system.agents $introspect');
    expect(out.stdout).toContain('asked by   agent:alpha in session s-cli');
    expect(out.stdout).toMatch(/digest {5}sha256:[0-9a-f]{64} of \d+ characters of JSON/);
    expect(out.stdout).toContain('"path": "/"');
    expect(out.stdout).toContain('"file": "report\\u202efdp.exe"');
    expect(out.stdout).not.toContain('\u202e');
    expect(out.stdout).not.toContain('TRUNCATED');
    const asJson = JSON.parse((await run(approvals, { id, json: true })).out.stdout) as PendingApproval;
    expect(asJson).toMatchObject({ approvalId: id, arguments: { args: far } });
    await run(reject, { id, reason: 'seen' });
    await result;
  });

  it('approvals <id> prints arguments past 16 KiB whole, where the list shows a preview', async () => {
    const long = { body: `${'line of a long file\n'.repeat(3_000)}the last line` };
    const { callId, result } = gatedCall(long);
    const id = await idOf(callId);
    const listed = JSON.parse((await run(approvals, { json: true })).out.stdout) as { approvals: PendingApproval[] };
    const preview = listed.approvals.find((a) => a.approvalId === id);
    expect(preview?.truncated).toBe(true);
    expect(typeof preview?.arguments).toBe('string');
    expect(preview?.arguments).not.toContain('the last line');
    const whole = JSON.parse((await run(approvals, { id, json: true })).out.stdout) as PendingApproval;
    expect(whole.truncated).toBeUndefined();
    expect(whole.arguments).toEqual({ target: 'system.agents', op: '$introspect', args: long });
    const printed = (await run(approvals, { id })).out.stdout;
    expect(printed).toContain('the last line');
    expect(printed).not.toContain('TRUNCATED');
    await run(reject, { id, reason: 'seen' });
    await result;
  });

  it('approvals <id> of an id it cannot see fails with not_found', async () => {
    const { code, out } = await run(approvals, { id: 'abcdefabcdefabcdef00-000000000000' });
    expect(code).toBe(ExitCode.Failed);
    expect(out.stderr).toContain('error (not_found)');
  });

  it('approve shows the approval in full and asks; no means it is not approved', async () => {
    const { callId, result } = gatedCall({ mount: 'system.tools' });
    const id = await idOf(callId);
    const asked: string[] = [];
    const declined = await run(approve, { id, confirm: async (q: string) => asked.push(q) < 0 });
    expect(declined.code).toBe(ExitCode.Failed);
    expect(asked).toEqual([`approve ${id}? [y/N] `]);
    expect(declined.out.stderr).toContain('"mount": "system.tools"');
    expect(declined.out.stderr).toContain('not approved');
    expect(declined.out.stdout).toBe('');

    const approved = await run(approve, { id, confirm: async () => true });
    expect(approved.code).toBe(ExitCode.Ok);
    expect(approved.out.stdout).toMatch(new RegExp(`^approved ${id} as anonymous`));
    const r = await result;
    expect(r.isError, JSON.stringify(r)).toBe(false);
  });

  it('approve without a terminal to ask and without --yes refuses, and the call still waits', async () => {
    const { callId, result } = gatedCall();
    const id = await idOf(callId);
    const refused = await run(approve, { id });
    expect(refused.code).toBe(ExitCode.Usage);
    expect(refused.out.stderr).toContain('pass --yes where stdin is not a terminal');
    expect(JSON.parse((await run(approvals, { id, json: true })).out.stdout)).toMatchObject({ approvalId: id });
    await run(reject, { id, reason: 'refused' });
    await result;
  });

  it('reject needs a reason, and the model reads it', async () => {
    const { callId, result } = gatedCall();
    const id = await idOf(callId);
    await expect(run(reject, { id })).resolves.toMatchObject({ code: ExitCode.Usage });
    const answered = await run(reject, { id, reason: 'not today' });
    expect(answered.out.stdout).toMatch(new RegExp(`^rejected ${id} as anonymous`));
    expect((await result).content).toContain('rejected by anonymous: not today');
  });

  it('a second answer is a conflict that says who answered first, as approve, reject or approvals <id>', async () => {
    const { callId, result } = gatedCall();
    const id = await idOf(callId);
    expect((await run(approve, { id, yes: true })).code).toBe(ExitCode.Ok);
    expect((await result).isError).toBe(false);
    for (const again of [
      () => run(approve, { id, yes: true }),
      () => run(reject, { id, reason: 'too late' }),
      () => run(approvals, { id }),
    ]) {
      const { code, out } = await again();
      expect(code).toBe(ExitCode.Failed);
      expect(out.stderr).toMatch(new RegExp(`^error \\(conflict\\): approval ${id} was already approved by anonymous`));
    }
  });

  it('approve of an unknown id fails with not_found and exit 1', async () => {
    const { code, out } = await run(approve, { id: 'abcdefabcdefabcdef00-000000000000', yes: true });
    expect(code).toBe(ExitCode.Failed);
    expect(out.stderr).toContain('error (not_found)');
  });

  it('approvals --watch prints each approval asked and answered', async () => {
    let stop: () => void = () => {};
    const until = new Promise<void>((resolve) => (stop = resolve));
    const out = memoryOutput();
    const watching = runVerb(approvals, { server: nats.url, watch: true, until }, out, {});
    await eventually(() => expect(out.stderr).toContain('watching approvals'));
    const { callId, result } = gatedCall();
    const id = await idOf(callId);
    await run(reject, { id, reason: 'watched' });
    await result;
    await eventually(() => {
      expect(out.stdout).toMatch(
        new RegExp(`pending ${id} matrix_invoke → system\\.agents \\$introspect for agent:alpha`),
      );
      expect(out.stdout).toMatch(new RegExp(`rejected ${id} .* by anonymous: watched`));
    });
    stop();
    expect(await watching).toBe(ExitCode.Ok);
  });
});

describe('the approvals verbs offline', () => {
  it('grant --approve-* makes a nats.approve claim of comma-separated globs, none without the flags', () => {
    expect(approveClaim({})).toBeUndefined();
    expect(approveClaim({ approveTools: 'deploy, matrix_*', approvePrincipals: 'agent:*' })).toEqual({
      tools: ['deploy', 'matrix_*'],
      principals: ['agent:*'],
    });
    expect(() => approveClaim({ approveTargets: ' , ' })).toThrow(UsageError);
    expect(approveClaim({ approveTargets: 'app.>, *.notes, app.billing' })).toEqual({
      targets: ['app.>', '*.notes', 'app.billing'],
    });
    for (const notPattern of ['app*', 'app.>.x', 'a..b', 'app.no>'])
      expect(() => approveClaim({ approveTargets: notPattern }), notPattern).toThrow(/NATS subject patterns/);
  });

  it('says plainly when the arguments shown are cut', () => {
    const cut: PendingApproval = {
      approvalId: 'abcdefabcdefabcdef00-000000000001',
      callId: 'c-1',
      tool: 'deploy',
      target: 'app',
      op: '$deploy',
      arguments: '{"a":"xxxx',
      truncated: true,
      argumentsDigest: 'ab'.repeat(32),
      argumentsBytes: 20_000,
      requestedAt: '2026-01-01T00:00:00Z',
      expiresAt: '2026-01-01T01:00:00Z',
    };
    expect(detail(cut)).toContain(
      'arguments  TRUNCATED: the first 10 of 20000 characters; if what you cannot see matters, reject\n{"a":"xxxx',
    );
    expect(detail(cut)).toContain('asked by   - in session - at 2026-01-01T00:00:00Z');
  });

  it('says how long an approval has left', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(left('2026-01-01T01:02:03Z', now)).toBe('1h 2m');
    expect(left('2026-01-01T00:02:03Z', now)).toBe('2m 3s');
    expect(left('2026-01-01T00:00:09Z', now)).toBe('9s');
    expect(left('2025-12-31T23:59:59Z', now)).toBe('expired');
  });
});
