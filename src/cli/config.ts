/**
 * Every setting of the CLI in one place: its flag, the environment variable it falls back to,
 * what it is for and its default. A run merges flags over environment here, once; the README's
 * Configuration table lists the same rows (a unit test holds the two together).
 *
 * The `NATS_*` variables are read by `connectOptionsFromEnv` (src/bus/connect.ts), the one
 * reader of them that library processes share; a connection setting here names its variable
 * for the help text, and a unit test checks that the bus reads that very variable.
 */
import { type Command, Option } from 'commander';
import { DEFAULT_APPROVALS_BUCKET } from '../approvals/types.js';
import { DEFAULT_REFUSAL_BURST, DEFAULT_REFUSALS_PER_MINUTE } from '../audit/refusals.js';
import type { AuditStreamOptions } from '../audit/stream.js';
import { type ConnectOptions, connectOptionsFromEnv, DEFAULT_NATS_URL } from '../bus/connect.js';
import { parseDuration } from '../identity/mint.js';
import { DEFAULT_SESSIONS_BUCKET } from '../reference-mounts/sessions.js';
import { DEFAULT_BUCKET } from '../registry/kv-store.js';
import { UsageError } from './output.js';
import type { ServeOptions } from './serve.js';

/** One setting: its flag and environment variable (either may be missing), its meaning and default. */
export interface Setting {
  /** Commander's flag syntax, e.g. `--bucket <name>`. */
  flags?: string;
  /** The environment variable read when the flag is not given. */
  env?: string;
  /** What it is for: the help line and the README row. */
  description: string;
  /** The default, in words. */
  defaultText: string;
}

/** Parsed flags of a verb (commander's attribute names), positional arguments included. */
export type Flags = Record<string, unknown>;

/** The connection settings, on every verb, keyed by the `ConnectOptions` field each sets. */
export const connectionSettings = {
  servers: {
    flags: '-s, --server <urls>',
    env: 'NATS_URL',
    description: 'NATS server URL(s), comma-separated',
    defaultText: DEFAULT_NATS_URL,
  },
  user: { flags: '--user <user>', env: 'NATS_USER', description: 'NATS user', defaultText: 'none' },
  pass: { flags: '--password <password>', env: 'NATS_PASSWORD', description: 'NATS password', defaultText: 'none' },
  token: { flags: '--token <token>', env: 'NATS_TOKEN', description: 'NATS token', defaultText: 'none' },
  nkeyFile: { flags: '--nkey <file>', env: 'NATS_NKEY', description: 'path of an nkey seed file', defaultText: 'none' },
  credsFile: {
    flags: '--creds <file>',
    env: 'NATS_CREDS',
    description: 'path of a JWT creds file',
    defaultText: 'none',
  },
  inboxPrefix: {
    flags: '--inbox-prefix <prefix>',
    env: 'NATS_INBOX_PREFIX',
    description: 'reply subject prefix, e.g. _INBOX_agent where a user may subscribe only to its own',
    defaultText: '_INBOX',
  },
} satisfies { [K in keyof ConnectOptions]?: Setting & { flags: string; env: string } };

/** The settings of `serve` (and `npm start`), keyed by the `ServeOptions` field each sets. */
export const serveSettings = {
  registry: { flags: '--no-registry', description: 'do not mount system.tools', defaultText: 'mounted' },
  dispatcher: { flags: '--no-dispatcher', description: 'do not mount system.dispatcher', defaultText: 'mounted' },
  reference: {
    flags: '--no-reference',
    description: 'do not mount system.agents, .sessions, .traces, .packages, .approvals',
    defaultText: 'mounted',
  },
  policy: {
    flags: '--policy <file>',
    env: 'MATRIX_APPROVAL_POLICY',
    description: 'approval policy file (JSON)',
    defaultText: 'ask a person for every gated call (a pending approval)',
  },
  mcpServers: {
    flags: '--mcp-servers <file>',
    env: 'MATRIX_MCP_SERVERS',
    description: 'an mcpServers file: host its MCP servers as mounts mcp.<name> (also `mcp-host`)',
    defaultText: 'none (no MCP server hosted)',
  },
  bucket: {
    flags: '--bucket <name>',
    env: 'MATRIX_TOOLS_BUCKET',
    description: 'KV bucket of registered contexts',
    defaultText: DEFAULT_BUCKET,
  },
  sessionsBucket: {
    flags: '--sessions-bucket <name>',
    env: 'MATRIX_SESSIONS_BUCKET',
    description: 'KV bucket of session state',
    defaultText: DEFAULT_SESSIONS_BUCKET,
  },
  approvalsBucket: {
    flags: '--approvals-bucket <name>',
    env: 'MATRIX_APPROVALS_BUCKET',
    description: 'KV bucket of pending approvals',
    defaultText: DEFAULT_APPROVALS_BUCKET,
  },
  trust: {
    flags: '--trust <nkeys>',
    env: 'MATRIX_TRUSTED_ISSUERS',
    description: 'trusted grant issuers, public nkeys, comma-separated: $call and $resolve then need a Matrix-Grant',
    defaultText: 'none (trusting callers: development)',
  },
  trustOidc: {
    flags: '--trust-oidc <issuers>',
    env: 'MATRIX_TRUSTED_OIDC_ISSUERS',
    description:
      'trusted OpenID Connect issuers, comma-separated: their access tokens (for --oidc-audience, mapped by --oidc-mapping) are grants too',
    defaultText: 'none',
  },
  oidcAudience: {
    flags: '--oidc-audience <resource>',
    env: 'MATRIX_OIDC_AUDIENCE',
    description: 'the resource an access token must name in its aud (RFC 8707); needed with --trust-oidc',
    defaultText: 'none',
  },
  oidcMapping: {
    flags: '--oidc-mapping <file>',
    env: 'MATRIX_OIDC_MAPPING',
    description:
      'the claims mapping (contracts/oidc-mapping.json): claims → principal, session, profile, refs, approve rights',
    defaultText: 'none',
  },
  grantAudience: {
    flags: '--grant-audience <aud>',
    env: 'MATRIX_GRANT_AUDIENCE',
    description: 'the audience a grant must name in its aud (audience_mismatch otherwise)',
    defaultText: 'none (a grant naming an aud is refused)',
  },
  allowUnsafeNats: {
    flags: '--allow-unsafe-nats',
    env: 'MATRIX_ALLOW_UNSAFE_NATS',
    description:
      'serve grants bound by nats.user on a nats-server without the fixes for CVE-2026-33223 and CVE-2026-33246 (any client can forge their holder there); true or false',
    defaultText: 'false (refused there: unsafe_server)',
  },
  grantMaxTtl: {
    flags: '--grant-max-ttl <duration>',
    env: 'MATRIX_GRANT_MAX_TTL',
    description: 'longest a grant may live (exp - iat, and from now): 90s, 15m, 1h, 7d; longer is too_long',
    defaultText: '24h',
  },
  metricsPort: {
    flags: '--metrics-port <port>',
    env: 'MATRIX_METRICS_PORT',
    description: 'serve Prometheus metrics on this port (/metrics)',
    defaultText: 'none',
  },
  metricsHost: {
    flags: '--metrics-host <host>',
    env: 'MATRIX_METRICS_HOST',
    description: 'the address the metrics endpoint listens on (0.0.0.0: every interface)',
    defaultText: '127.0.0.1',
  },
  metricsToken: {
    env: 'MATRIX_METRICS_TOKEN',
    description: 'a bearer token /metrics demands (Authorization: Bearer <token>)',
    defaultText: 'none',
  },
  otlpEndpoint: {
    env: 'OTEL_EXPORTER_OTLP_ENDPOINT',
    description: 'send spans and metrics over OTLP/HTTP to this endpoint (the OpenTelemetry variable)',
    defaultText: 'none',
  },
  auditStream: {
    env: 'MATRIX_AUDIT_STREAM',
    description: 'JetStream stream of audit events',
    defaultText: 'MATRIX_AUDIT',
  },
  auditMaxAge: {
    env: 'MATRIX_AUDIT_MAX_AGE',
    description: 'age past which audit events are dropped, in seconds',
    defaultText: '604800 (7 days)',
  },
  auditMaxBytes: {
    env: 'MATRIX_AUDIT_MAX_BYTES',
    description: 'size past which the oldest audit events are dropped, in bytes',
    defaultText: '1073741824 (1 GiB)',
  },
  auditShare: {
    env: 'MATRIX_AUDIT_SHARE',
    description:
      "each principal's share of the audit trail: 1/N of its bytes per max age (past it: the overflow stream); 0: none",
    defaultText: '16',
  },
  auditOverflowBytes: {
    env: 'MATRIX_AUDIT_OVERFLOW_BYTES',
    description: 'size of the overflow stream <stream>_OVERFLOW, oldest dropped first, in bytes',
    defaultText: 'a quarter of MATRIX_AUDIT_MAX_BYTES',
  },
  auditRefusals: {
    env: 'MATRIX_AUDIT_REFUSALS',
    description: '$calls refused without a valid grant stored one by one per minute, per instance; the rest summarised',
    defaultText: String(DEFAULT_REFUSALS_PER_MINUTE),
  },
  auditRefusalBurst: {
    env: 'MATRIX_AUDIT_REFUSAL_BURST',
    description: 'of those, most stored in a row after a quiet spell',
    defaultText: String(DEFAULT_REFUSAL_BURST),
  },
  replicas: {
    env: 'MATRIX_TOOLS_REPLICAS',
    description: 'replicas of the buckets when the service creates them (1–5)',
    defaultText: '1',
  },
} satisfies {
  [K in
    | keyof ServeOptions
    | 'grantMaxTtl'
    | 'trustOidc'
    | 'oidcAudience'
    | 'oidcMapping'
    | 'auditStream'
    | 'auditMaxAge'
    | 'auditMaxBytes'
    | 'auditOverflowBytes'
    | 'auditRefusals'
    | 'auditRefusalBurst']?: Setting;
};

/** Adds a flag for each setting that has one; the help line names its variable and default. */
export function addSettings(cmd: Command, settings: Record<string, Setting>): Command {
  for (const s of Object.values(settings)) {
    if (s.flags === undefined) continue;
    const env = s.env === undefined ? '' : `env: ${s.env}, `;
    cmd.addOption(new Option(s.flags, `${s.description} (${env}default: ${s.defaultText})`));
  }
  return cmd;
}

/** The connection flags, on every verb. */
export function withConnection(cmd: Command): Command {
  return addSettings(cmd, connectionSettings);
}

/** A setting's flag value as commander parsed it; undefined when not given. */
export function flagValue(setting: Setting, flags: Flags): unknown {
  return setting.flags === undefined ? undefined : flags[new Option(setting.flags).attributeName()];
}

/** A setting's value: its flag when given, else its environment variable when set and not empty. */
export function settingValue(setting: Setting, flags: Flags, env: NodeJS.ProcessEnv): unknown {
  const flag = flagValue(setting, flags);
  if (flag !== undefined) return flag;
  const fromEnv = setting.env === undefined ? undefined : env[setting.env];
  return fromEnv === '' ? undefined : fromEnv;
}

/** Where a connection's server URL came from, in words for an error: `NATS_URL`, `--server`, or the default. */
export function serversSource(servers: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (servers !== undefined && servers === env.NATS_URL) return 'from NATS_URL';
  if (servers === undefined || (servers === DEFAULT_NATS_URL && !env.NATS_URL))
    return 'the default: neither --server nor NATS_URL is set';
  return 'from --server';
}

/**
 * Where a connection goes and as whom, each with where it came from, for the errors that say NATS
 * or a mount could not be reached: `nats://h:4222 (from NATS_URL) as user agent (from --user)`.
 * A value equal to its variable's is said to come from the variable, as `serversSource` says.
 */
export function connectionSource(options: ConnectOptions, env: NodeJS.ProcessEnv = process.env): string {
  const origin = (value: string, setting: { flags: string; env: string }) =>
    value === env[setting.env] ? `from ${setting.env}` : `from ${new Option(setting.flags).long}`;
  const s = connectionSettings;
  const who =
    options.user !== undefined
      ? `as user ${options.user} (${origin(options.user, s.user)})`
      : options.credsFile !== undefined
        ? `with creds ${options.credsFile} (${origin(options.credsFile, s.credsFile)})`
        : options.nkeyFile !== undefined
          ? `with nkey ${options.nkeyFile} (${origin(options.nkeyFile, s.nkeyFile)})`
          : options.token !== undefined
            ? `with a token (${origin(options.token, s.token)})`
            : 'as no user (neither --user nor NATS_USER is set)';
  return `${options.servers} (${serversSource(options.servers, env)}) ${who}`;
}

/** Where and how to connect: the connection flags over the `NATS_*` environment. */
export function connectConfig(
  flags: Flags,
  env: NodeJS.ProcessEnv = process.env,
  name = 'matrix-tools-cli',
): ConnectOptions {
  const options: ConnectOptions = { ...connectOptionsFromEnv(env), name };
  for (const [field, setting] of Object.entries(connectionSettings)) {
    const value = flagValue(setting, flags);
    if (typeof value === 'string' && value !== '') options[field as keyof typeof connectionSettings] = value;
  }
  return options;
}

/** What `serve` runs: its flags over the environment over the defaults. */
export function serveConfig(flags: Flags, env: NodeJS.ProcessEnv = process.env): ServeOptions {
  const value = (s: Setting) => settingValue(s, flags, env);
  const s = serveSettings;
  const options: ServeOptions = {
    connect: connectConfig(flags, env, 'matrix-tool-registry'),
    registry: value(s.registry) !== false,
    dispatcher: value(s.dispatcher) !== false,
    reference: value(s.reference) !== false,
    bucket: String(value(s.bucket) ?? DEFAULT_BUCKET),
    sessionsBucket: String(value(s.sessionsBucket) ?? DEFAULT_SESSIONS_BUCKET),
    approvalsBucket: String(value(s.approvalsBucket) ?? DEFAULT_APPROVALS_BUCKET),
    replicas: wholeNumber(s.replicas.env, value(s.replicas), 1, 5) ?? 1,
    audit: auditConfig(value),
  };
  const metricsPort = wholeNumber('--metrics-port', value(s.metricsPort), 0, 65535);
  if (metricsPort !== undefined) options.metricsPort = metricsPort;
  const metricsHost = value(s.metricsHost);
  if (typeof metricsHost === 'string') options.metricsHost = metricsHost;
  const metricsToken = value(s.metricsToken);
  if (typeof metricsToken === 'string' && metricsToken !== '') options.metricsToken = metricsToken;
  const otlp = value(s.otlpEndpoint);
  if (typeof otlp === 'string') options.otlpEndpoint = otlp;
  const policy = value(s.policy);
  if (typeof policy === 'string') options.policy = policy;
  const mcpServers = value(s.mcpServers);
  if (typeof mcpServers === 'string' && mcpServers !== '') options.mcpServers = mcpServers;
  const trust = value(s.trust);
  if (typeof trust === 'string') options.trust = trust;
  const audience = value(s.grantAudience);
  if (typeof audience === 'string') options.grantAudience = audience;
  const oidc = oidcConfig(value(s.trustOidc), value(s.oidcAudience), value(s.oidcMapping));
  if (oidc !== undefined) options.oidc = oidc;
  const allowUnsafeNats = yesOrNo(s.allowUnsafeNats.env, value(s.allowUnsafeNats));
  if (allowUnsafeNats !== undefined) options.allowUnsafeNats = allowUnsafeNats;
  const maxTtl = grantMaxTtlSeconds(value(s.grantMaxTtl));
  if (maxTtl !== undefined) options.grantMaxTtlSeconds = maxTtl;
  const share = wholeNumber(s.auditShare.env, value(s.auditShare), 0);
  if (share !== undefined) options.auditShare = share;
  const perMinute = wholeNumber(s.auditRefusals.env, value(s.auditRefusals), 0);
  const burst = wholeNumber(s.auditRefusalBurst.env, value(s.auditRefusalBurst), 0);
  if (perMinute !== undefined || burst !== undefined)
    options.refusals = { ...(perMinute !== undefined && { perMinute }), ...(burst !== undefined && { burst }) };
  return options;
}

/** The OIDC trust the three settings give together, or undefined; a usage error names what is missing. */
function oidcConfig(issuers: unknown, audience: unknown, mapping: unknown): ServeOptions['oidc'] {
  const list =
    typeof issuers === 'string'
      ? issuers
          .split(',')
          .map((i) => i.trim())
          .filter((i) => i !== '')
      : [];
  if (list.length === 0) {
    if (audience !== undefined || mapping !== undefined)
      throw new UsageError('--oidc-audience and --oidc-mapping go with --trust-oidc (MATRIX_TRUSTED_OIDC_ISSUERS)');
    return undefined;
  }
  if (typeof audience !== 'string' || audience === '')
    throw new UsageError(
      '--trust-oidc needs --oidc-audience (MATRIX_OIDC_AUDIENCE): the resource its tokens must name',
    );
  if (typeof mapping !== 'string' || mapping === '')
    throw new UsageError('--trust-oidc needs --oidc-mapping (MATRIX_OIDC_MAPPING): how a token becomes a session');
  return { issuers: list, audience, mapping };
}

/** Where audit events are stored: the audit settings, replicas as the buckets'. */
function auditConfig(value: (s: Setting) => unknown): AuditStreamOptions {
  const s = serveSettings;
  const audit: AuditStreamOptions = { replicas: wholeNumber(s.replicas.env, value(s.replicas), 1, 5) ?? 1 };
  const stream = value(s.auditStream);
  if (typeof stream === 'string') audit.stream = stream;
  const maxAge = wholeNumber(s.auditMaxAge.env, value(s.auditMaxAge), 1);
  if (maxAge !== undefined) audit.maxAgeMs = maxAge * 1000;
  const maxBytes = wholeNumber(s.auditMaxBytes.env, value(s.auditMaxBytes), 1);
  if (maxBytes !== undefined) audit.maxBytes = maxBytes;
  const overflowBytes = wholeNumber(s.auditOverflowBytes.env, value(s.auditOverflowBytes), 1);
  if (overflowBytes !== undefined) audit.overflowBytes = overflowBytes;
  return audit;
}

/** A whole number from `min` to `max`, or undefined when not set; anything else is a usage error naming `name`. */
export function wholeNumber(
  name: string,
  value: unknown,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (typeof value !== 'string' || value.trim() === '' || !Number.isInteger(n) || n < min || n > max) {
    throw new UsageError(
      `${name} must be a whole number from ${min}${max === Number.MAX_SAFE_INTEGER ? ' up' : ` to ${max}`}, got '${String(value)}'`,
    );
  }
  return n;
}

/** A switch: the flag given (true), or its variable's `true`/`1` or `false`/`0`; undefined when unset; else a usage error naming `name`. */
export function yesOrNo(name: string, value: unknown): boolean | undefined {
  if (value === undefined || typeof value === 'boolean') return value;
  const text = String(value).trim().toLowerCase();
  if (text === 'true' || text === '1') return true;
  if (text === 'false' || text === '0') return false;
  throw new UsageError(`${name} must be true or false, got '${String(value)}'`);
}

/**
 * `MATRIX_GRANT_MAX_TTL` / `--grant-max-ttl` in seconds (a duration, `24h`); undefined when unset;
 * a usage error when not one.
 */
export function grantMaxTtlSeconds(value: unknown): number | undefined {
  if (typeof value !== 'string') return undefined;
  try {
    return parseDuration(value);
  } catch (err) {
    throw new UsageError(`MATRIX_GRANT_MAX_TTL / --grant-max-ttl: ${(err as Error).message}`);
  }
}
