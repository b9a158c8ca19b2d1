/**
 * What each CLI verb prints and returns, run in-process against `serve()` on a NATS server of
 * this file's own (so these tests can run beside any other file).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_NATS_URL } from '../../src/bus/connect.js';
import { silentLogger } from '../../src/bus/log.js';
import { call, introspect, list, register, resolve, unregister, watch } from '../../src/cli/commands.js';
import { serveConfig, serversSource } from '../../src/cli/config.js';
import { ExitCode } from '../../src/cli/output.js';
import { runVerb } from '../../src/cli/run.js';
import { search } from '../../src/cli/search.js';
import { runServe, type ServeHandle, serve } from '../../src/cli/serve.js';
import { memoryOutput } from '../harness/cli.js';
import { eventually } from '../harness/eventually.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';

describe('the CLI verbs', () => {
  let nats: ProcessNats;
  let served: ServeHandle;
  const dir = mkdtempSync(join(tmpdir(), 'cli-verbs-'));
  /** Runs a verb as the CLI does (connect, run, drain), against this file's server only. */
  const run = async (verb: Parameters<typeof runVerb>[0], args: Record<string, unknown> = {}) => {
    const out = memoryOutput();
    const code = await runVerb(verb, { server: nats.url, ...args }, out, {});
    return { code, out };
  };

  beforeAll(async () => {
    nats = await startNatsProcess();
    served = await serve(serveConfig({ server: nats.url }, {}), silentLogger);
  });
  afterAll(async () => {
    await served?.stop();
    await nats?.stop();
  });

  it('list prints every context as a table with the registry revision, or JSON', async () => {
    const { code, out } = await run(list);
    expect(code).toBe(ExitCode.Ok);
    expect(out.stdout.split('\n')[0]).toMatch(/^KEY\s+SOURCE\s+REV\s+TOOLS$/);
    expect(out.stdout).toMatch(/actor-readonly\s+built-in\s+0\s+matrix_introspect, session_state_read/);
    expect(out.printed.at(-1)).toMatch(/^\(\d+ contexts, registry revision \d+\)$/);
    const asJson = JSON.parse((await run(list, { json: true, tool: 'matrix_invoke' })).out.stdout) as {
      contexts: Array<{ key: string }>;
    };
    expect(asJson.contexts.map((c) => c.key)).toEqual(['actor-edit']);
  });

  it('resolve prints the header line and one row per tool, or the whole reply as JSON', async () => {
    const { code, out } = await run(resolve, { profile: 'edit' });
    expect(code).toBe(ExitCode.Ok);
    expect(out.printed[0]).toMatch(/^contexts: actor-edit {3}timeout \d+ ms {3}revision \d+ {3}digest [0-9a-f]{16}$/);
    expect(out.stdout).toMatch(/matrix_invoke\s+actor-edit\s+system\.dispatcher \$invoke\s+approval/);
    const reply = JSON.parse((await run(resolve, { profile: 'default', json: true, format: 'openai' })).out.stdout) as {
      providerTools: unknown[];
    };
    expect(reply.providerTools).toHaveLength(2);
  });

  it('search ranks the session’s tools for a need, as a table or the whole reply', async () => {
    const { code, out } = await run(search, { query: 'describe the live mounts', profile: 'propose', worker: 'codex' });
    expect(code).toBe(ExitCode.Ok);
    expect(out.stdout.split('\n')[0]).toMatch(/^#\s+SCORE\s+TOOL\s+CONTEXT\s+DESCRIPTION$/);
    expect(out.printed.at(-1)).toMatch(/^\(\d+ of \d+ matching tools\)$/);
    const reply = JSON.parse(
      (await run(search, { query: 'describe the live mounts', profile: 'default', json: true, limit: '1' })).out.stdout,
    ) as { tools: Array<{ name: string; context: string }>; total: number };
    expect(reply.tools).toEqual([expect.objectContaining({ name: 'matrix_introspect', context: 'actor-readonly' })]);
    // The default profile's session has no matrix_invoke: a search never shows it.
    const invoke = JSON.parse(
      (await run(search, { query: 'invoke an op', profile: 'default', json: true })).out.stdout,
    );
    expect(JSON.stringify(invoke)).not.toContain('matrix_invoke');
  });

  it('call prints the content on stdout and the trace line on stderr; a failed tool exits 1', async () => {
    const ok = await run(call, { tool: 'matrix_introspect', profile: 'default', args: '{"mount":"system.tools"}' });
    expect(ok.code).toBe(ExitCode.Ok);
    expect(ok.out.stdout).toContain('$resolve');
    expect(ok.out.notes).toEqual([expect.stringMatching(/^trace [0-9a-f]{32} {2}ok {2}\d+\.\d ms$/)]);
    const failed = await run(call, { tool: 'no_such_tool', profile: 'default', json: true });
    expect(failed.code).toBe(ExitCode.Failed);
    expect(JSON.parse(failed.out.stdout)).toMatchObject({ isError: true, error: { code: 'not_found' } });
    expect(failed.out.stderr).toMatch(/error not_found/);
  });

  it('call refuses unreadable --args and --timeout as usage errors, before calling', async () => {
    for (const bad of [{ args: '{oops' }, { args: '[1]' }, { timeout: 'soon' }]) {
      const { code, out } = await run(call, { tool: 'matrix_introspect', profile: 'default', ...bad });
      expect(code).toBe(ExitCode.Usage);
      expect(out.stderr).toMatch(/^error: (--args|--timeout) /);
      expect(out.printed).toEqual([]);
    }
  });

  it('introspect prints the live mounts, or one mount’s ops', async () => {
    const all = await run(introspect);
    expect(all.code).toBe(ExitCode.Ok);
    expect(all.out.stdout).toMatch(/^MOUNT\s+INSTANCES\s+VERSION\s+OPS/);
    expect(all.out.stdout).toMatch(/system\.tools\s+1\s+\S+\s+\$introspect \$list \$resolve/);
    const one = await run(introspect, { mount: 'system.dispatcher' });
    expect(one.out.printed[0]).toMatch(/^system\.dispatcher \S+ \(instance \S+\)$/);
    expect(one.out.stdout).toMatch(/\$call\s+Runs one LLM tool call/);
  });

  it('register and unregister print the key and revision; a bad file or revision is a usage error', async () => {
    const file = join(dir, 'specs.json');
    const spec = (key: string) => ({ key, title: key, description: 'from a file', permissions: { approval: 'never' } });
    writeFileSync(file, JSON.stringify([spec('cli-a'), spec('cli-b')]));
    const added = await run(register, { file });
    expect(added.code).toBe(ExitCode.Ok);
    expect(added.out.printed).toEqual([
      expect.stringMatching(/^registered cli-a at revision \d+$/),
      expect.stringMatching(/^registered cli-b at revision \d+$/),
    ]);
    const stale = await run(register, { file, expectedRevision: '0' });
    expect(stale.code).toBe(ExitCode.Failed);
    expect(stale.out.stderr).toMatch(/^error \(conflict\): /);
    expect((await run(register, { file: join(dir, 'missing.json') })).code).toBe(ExitCode.Usage);
    expect((await run(unregister, { key: 'cli-a', expectedRevision: 'latest' })).out.stderr).toMatch(
      /--expected-revision must be a whole number/,
    );
    const removed = await run(unregister, { key: 'cli-a' });
    expect(removed.out.printed).toEqual([expect.stringMatching(/^unregistered cli-a at revision \d+$/)]);
    await run(unregister, { key: 'cli-b' });
  });

  it('watch prints each registry change and each call (as JSON lines with --json) until told to stop', async () => {
    let stop = () => {};
    const until = new Promise<void>((resolve) => (stop = resolve));
    const out = memoryOutput();
    const watching = runVerb(watch, { server: nats.url, calls: true, json: true, until }, out, {});
    await eventually(() => expect(out.notes).toContain('watching; Ctrl-C to stop'));
    const file = join(dir, 'watched.json');
    writeFileSync(
      file,
      JSON.stringify({ key: 'cli-watched', title: 'W', description: 'watched', permissions: { approval: 'never' } }),
    );
    await run(register, { file });
    await run(call, { tool: 'matrix_introspect', profile: 'default' });
    await run(unregister, { key: 'cli-watched' });
    const lines = () =>
      out.printed.map(
        (l) => JSON.parse(l) as { kind: string; event: { key?: string; change?: string; name?: string } },
      );
    await eventually(() => {
      expect(
        lines()
          .filter((l) => l.event.key === 'cli-watched')
          .map((l) => l.event.change),
      ).toEqual(['registered', 'unregistered']);
      expect(lines()).toContainEqual(
        expect.objectContaining({ kind: 'call', event: expect.objectContaining({ name: 'matrix_introspect' }) }),
      );
    });
    stop();
    expect(await watching).toBe(ExitCode.Ok);
  });

  it('says in one line that NATS is unreachable, at which URL, as whom, where each came from, and exits 3', async () => {
    const out = memoryOutput();
    expect(await runVerb(list, { server: 'nats://127.0.0.1:1' }, out, {})).toBe(ExitCode.Unreachable);
    expect(out.stderr).toMatch(
      /^error: cannot reach NATS at nats:\/\/127\.0\.0\.1:1 \(from --server\) as no user \(neither --user nor NATS_USER is set\): .*pass --server \/ NATS_URL\)$/,
    );
    const fromEnv = memoryOutput();
    const env = { NATS_URL: 'nats://127.0.0.1:2', NATS_USER: 'ana' };
    expect(await runVerb(list, {}, fromEnv, env)).toBe(ExitCode.Unreachable);
    expect(fromEnv.stderr).toMatch(
      /^error: cannot reach NATS at nats:\/\/127\.0\.0\.1:2 \(from NATS_URL\) as user ana \(from NATS_USER\): /,
    );
    const creds = memoryOutput();
    await runVerb(list, { server: 'nats://127.0.0.1:3', creds: '/no/such.creds' }, creds, {});
    expect(creds.stderr).toContain('nats://127.0.0.1:3 (from --server) with creds /no/such.creds (from --creds)');
  });

  it('says which NATS it asked, as whom, when nothing serves the op', async () => {
    const bare = await startNatsProcess();
    try {
      const out = memoryOutput();
      expect(await runVerb(list, { server: bare.url, user: 'bob', password: 'x' }, out, {})).toBe(ExitCode.Unreachable);
      expect(out.stderr).toContain('error (unavailable): no responders for system.tools.$list');
      expect(out.stderr).toContain(`asked on NATS at ${bare.url} (from --server) as user bob (from --user)`);
    } finally {
      await bare.stop();
    }
  });

  it('names the default URL as the default when neither --server nor NATS_URL is set', () => {
    expect(serversSource(undefined, {})).toBe('the default: neither --server nor NATS_URL is set');
    expect(serversSource(DEFAULT_NATS_URL, {})).toBe('the default: neither --server nor NATS_URL is set');
    expect(serversSource('nats://h:1', { NATS_URL: 'nats://h:1' })).toBe('from NATS_URL');
  });
});

describe('serve()', () => {
  it('returns a handle whose stop() drains and resolves, without ending the process', async () => {
    const nats = await startNatsProcess();
    try {
      const handle = await serve(
        serveConfig({ server: nats.url, reference: false, bucket: 'serve-handle' }, {}),
        silentLogger,
      );
      expect(handle.mounts).toEqual(['system.tools', 'system.dispatcher', 'system.tasks']);
      const first = handle.stop('test');
      expect(handle.stop('again')).toBe(first);
      await first;
      expect(handle.connection.isClosed()).toBe(true);
    } finally {
      await nats.stop();
    }
  });

  it('runs as the serve command until told to stop, then exits 0; 1 when NATS is missing; 2 with nothing to run', async () => {
    const nats = await startNatsProcess();
    try {
      const out = memoryOutput();
      let stop = (_signal: string) => {};
      const until = new Promise<string>((resolve) => (stop = resolve));
      const running = runServe({ server: nats.url, reference: false, bucket: 'run-serve' }, out, {}, until);
      stop('SIGTERM');
      expect(await running).toBe(ExitCode.Ok);
    } finally {
      await nats.stop();
    }
    const missing = memoryOutput();
    expect(await runServe({ server: 'nats://127.0.0.1:1' }, missing, {}, new Promise(() => {}))).toBe(ExitCode.Failed);
    expect(missing.stderr).toMatch(
      /^error: cannot reach NATS at nats:\/\/127\.0\.0\.1:1 \(from --server\) as no user \(.*\): .*\. Start one with `docker compose up -d nats`/,
    );
    const nothing = memoryOutput();
    expect(
      await runServe({ registry: false, dispatcher: false, reference: false }, nothing, {}, new Promise(() => {})),
    ).toBe(ExitCode.Usage);
    expect(nothing.notes).toEqual(['error: nothing to run: every mount is turned off']);
  });

  it('refuses to run with every mount turned off, before connecting', async () => {
    await expect(
      serve(serveConfig({ server: 'nats://127.0.0.1:1', registry: false, dispatcher: false, reference: false }, {})),
    ).rejects.toThrow('nothing to run: every mount is turned off');
  });
});
