import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { connectOptionsFromEnv } from '../../src/bus/connect.js';
import { MatrixError, TimeoutError } from '../../src/bus/errors.js';
import { calloutSettings } from '../../src/cli/auth-callout.js';
import {
  addSettings,
  connectConfig,
  connectionSettings,
  type Setting,
  serveConfig,
  serveSettings,
  withConnection,
} from '../../src/cli/config.js';
import { ExitCode, reportError, table, UsageError } from '../../src/cli/output.js';
import { sessionRequest, withSession } from '../../src/cli/session-flags.js';
import { memoryOutput } from '../harness/cli.js';

/** Parses `argv` with the `serve` flags as commander would, without running anything. */
function serveFlags(...argv: string[]): Record<string, unknown> {
  const cmd = addSettings(withConnection(new Command('serve').exitOverride()), serveSettings);
  return cmd.parse(argv, { from: 'user' }).opts();
}

describe('CLI configuration: flags over environment over defaults', () => {
  it('serves with the defaults when nothing is set', () => {
    expect(serveConfig(serveFlags(), {})).toEqual({
      connect: { servers: 'nats://127.0.0.1:4222', name: 'matrix-tool-registry' },
      registry: true,
      dispatcher: true,
      reference: true,
      bucket: 'matrix-tool-contexts',
      sessionsBucket: 'matrix-sessions',
      approvalsBucket: 'matrix-approvals',
      replicas: 1,
      audit: { replicas: 1 },
    });
  });

  it('reads every variable, and a flag wins over its variable', () => {
    const env = {
      NATS_URL: 'nats://env:4222',
      NATS_USER: 'env-user',
      NATS_PASSWORD: 'env-pass',
      NATS_TOKEN: 'env-token',
      MATRIX_TOOLS_BUCKET: 'env-bucket',
      MATRIX_SESSIONS_BUCKET: 'env-sessions',
      MATRIX_TOOLS_REPLICAS: '3',
      MATRIX_APPROVAL_POLICY: '/env/policy.json',
      MATRIX_TRUSTED_ISSUERS: 'UENV',
      MATRIX_METRICS_PORT: '9464',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel:4318',
      MATRIX_AUDIT_STREAM: 'ENV_AUDIT',
      MATRIX_AUDIT_MAX_AGE: '60',
      MATRIX_AUDIT_MAX_BYTES: '1024',
      MATRIX_AUDIT_REFUSALS: '0',
      MATRIX_AUDIT_REFUSAL_BURST: '20',
    };
    const options = serveConfig(
      serveFlags('--server', 'nats://flag:4222', '--user', 'flag-user', '--bucket', 'flag-bucket', '--no-dispatcher'),
      env,
    );
    expect(options).toMatchObject({
      connect: { servers: 'nats://flag:4222', user: 'flag-user', pass: 'env-pass', token: 'env-token' },
      dispatcher: false,
      registry: true,
      bucket: 'flag-bucket',
      sessionsBucket: 'env-sessions',
      replicas: 3,
      policy: '/env/policy.json',
      trust: 'UENV',
      metricsPort: 9464,
      otlpEndpoint: 'http://otel:4318',
      audit: { stream: 'ENV_AUDIT', maxAgeMs: 60_000, maxBytes: 1024, replicas: 3 },
      refusals: { perMinute: 0, burst: 20 },
    });
  });

  it("reads a principal's share of the trail and the overflow's size, and refuses a share that is not a whole number", () => {
    const env = { MATRIX_AUDIT_SHARE: '0', MATRIX_AUDIT_OVERFLOW_BYTES: '512' };
    expect(serveConfig(serveFlags(), env)).toMatchObject({ auditShare: 0, audit: { overflowBytes: 512 } });
    expect(serveConfig(serveFlags(), {}).auditShare).toBeUndefined();
    expect(() => serveConfig(serveFlags(), { MATRIX_AUDIT_SHARE: 'half' })).toThrow(
      /MATRIX_AUDIT_SHARE must be a whole number/,
    );
  });

  it('takes an empty variable for unset', () => {
    expect(serveConfig(serveFlags(), { MATRIX_TOOLS_BUCKET: '', NATS_URL: '' })).toMatchObject({
      bucket: 'matrix-tool-contexts',
      connect: { servers: 'nats://127.0.0.1:4222' },
    });
  });

  it('reads --allow-unsafe-nats and MATRIX_ALLOW_UNSAFE_NATS (true/false, 1/0), and refuses anything else', () => {
    expect(serveConfig(serveFlags('--allow-unsafe-nats'), {}).allowUnsafeNats).toBe(true);
    expect(serveConfig(serveFlags(), {}).allowUnsafeNats).toBeUndefined();
    for (const [text, value] of [
      ['true', true],
      ['1', true],
      ['FALSE', false],
      ['0', false],
    ] as const)
      expect(serveConfig(serveFlags(), { MATRIX_ALLOW_UNSAFE_NATS: text }).allowUnsafeNats, text).toBe(value);
    expect(() => serveConfig(serveFlags(), { MATRIX_ALLOW_UNSAFE_NATS: 'yes please' })).toThrow(
      "MATRIX_ALLOW_UNSAFE_NATS must be true or false, got 'yes please'",
    );
  });

  it('refuses replicas that are not a whole number from 1 to 5, naming the variable', () => {
    for (const bad of ['0', '6', '2.5', 'three', ' ']) {
      expect(() => serveConfig(serveFlags(), { MATRIX_TOOLS_REPLICAS: bad })).toThrow(UsageError);
    }
    expect(() => serveConfig(serveFlags(), { MATRIX_TOOLS_REPLICAS: 'x' })).toThrow(
      "MATRIX_TOOLS_REPLICAS must be a whole number from 1 to 5, got 'x'",
    );
  });

  it('names each connection variable as the bus reads it (connectOptionsFromEnv)', () => {
    for (const [field, setting] of Object.entries(connectionSettings)) {
      expect(connectOptionsFromEnv({ [setting.env]: 'sentinel' }), setting.env).toMatchObject({ [field]: 'sentinel' });
      expect(connectConfig({}, { [setting.env]: 'sentinel' }), setting.env).toMatchObject({
        [field]: 'sentinel',
        name: 'matrix-tools-cli',
      });
    }
  });

  it('documents every flag and variable, with its default, in the README Configuration table', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const section = readme.slice(
      readme.indexOf('## Configuration'),
      readme.indexOf('\n## ', readme.indexOf('## Configuration') + 1),
    );
    const settings: Setting[] = [
      ...Object.values(connectionSettings),
      ...Object.values(serveSettings),
      ...Object.values(calloutSettings),
    ];
    for (const s of settings) {
      const flag = s.flags?.match(/--[a-z-]+/)?.[0];
      const row = section
        .split('\n')
        .find(
          (line) =>
            (s.env === undefined || line.includes(`\`${s.env}\``)) && (flag === undefined || line.includes(flag)),
        );
      expect(row, `${s.env ?? ''} ${flag ?? ''}`).toBeDefined();
      if (!['none', 'mounted'].includes(s.defaultText)) expect(row, `${s.env ?? flag}`).toContain(s.defaultText);
    }
  });
});

describe('CLI session flags', () => {
  it('turns the flags into one $resolve request', () => {
    const cmd = withSession(new Command('resolve').exitOverride());
    const flags = cmd
      .parse(
        [
          '-p',
          'edit',
          '--refs',
          'a, b,',
          '--skill',
          'review=x,y',
          '--skill',
          'plain',
          '--environment',
          '{"repoRoot":"/src"}',
          '--only-available',
        ],
        {
          from: 'user',
        },
      )
      .opts();
    expect(sessionRequest(flags as never)).toEqual({
      profile: 'edit',
      toolContextRefs: ['a', 'b'],
      skills: [{ name: 'review', toolContextRefs: ['x', 'y'] }, { name: 'plain' }],
      environment: { repoRoot: '/src' },
      onlyAvailable: true,
    });
  });

  it('refuses bad JSON and a skill without a name as usage errors naming the flag', () => {
    expect(() => sessionRequest({ profile: 'p', environment: '{' })).toThrow(/^--environment is not valid JSON/);
    expect(() => sessionRequest({ profile: 'p', skill: ['=x'] })).toThrow("--skill takes name=ref1,ref2, got '=x'");
  });
});

describe('CLI output', () => {
  it('pads a table to its widest cell, without trailing spaces', () => {
    expect(
      table(
        ['A', 'LONG'],
        [
          ['xyz', ''],
          ['', 'y'],
        ],
      ),
    ).toBe('A    LONG\n---  ----\nxyz\n     y');
  });

  it('reports an error in a line or a few and picks the exit code', () => {
    const out = memoryOutput();
    expect(reportError(new UsageError('bad flag'), out)).toBe(ExitCode.Usage);
    expect(reportError(new TimeoutError('too slow'), out)).toBe(ExitCode.Unreachable);
    const invalid = new MatrixError('bad_request', 'invalid request', {
      details: { violations: [{ path: '/profile', message: 'must be string' }] },
    });
    expect(reportError(invalid, out)).toBe(ExitCode.Failed);
    expect(reportError(new Error('connect ECONNREFUSED 127.0.0.1:1'), out)).toBe(ExitCode.Unreachable);
    expect(out.notes).toEqual([
      'error: bad flag',
      'error (timeout): too slow',
      'error (bad_request): invalid request',
      '  /profile: must be string',
      'error: connect ECONNREFUSED 127.0.0.1:1',
    ]);
  });
});
