/**
 * `matrix-tools keys` makes an issuer key; `matrix-tools grant` mints a session grant with it
 * (PROTOCOL 3.1). Neither touches NATS: keys and grants are made offline, where the issuer's
 * seed lives.
 */
import { existsSync, writeFileSync } from 'node:fs';
import type { Command } from 'commander';
import { mintGrant, newIssuerKey, parseDuration, readIssuerSeed } from '../identity/mint.js';
import { type ApproveClaim, AUTHORITY_FIELDS, type GrantAuthority } from '../identity/types.js';
import { DEFAULT_GRANT_MAX_TTL_SECONDS, HOLDER_NAME, INBOX_PREFIX, SESSION_ID } from '../identity/verify.js';
import { grantMaxTtlSeconds } from './config.js';
import { ExitCode, type Output, processOutput, reportError, UsageError } from './output.js';
import { type SessionFlags, sessionRequest } from './session-flags.js';

/** Flags of `grant`. */
interface GrantFlags extends SessionFlags {
  issuer: string;
  principal: string;
  session: string;
  ttl: string;
  notBefore?: string;
  readSessions?: string;
  approveTools?: string;
  approveTargets?: string;
  approvePrincipals?: string;
  inbox?: string;
  user?: string;
  account: string;
  audience?: string;
}

/** Adds `grant` and `keys` to the program; `withSession` adds the session flags the grant's authority comes from. */
export function addIdentityCommands(program: Command, withSession: (cmd: Command) => Command): void {
  withSession(
    program.command('grant').description("mint a session grant (a JWT for Matrix-Grant) signed by an issuer's seed"),
  )
    .requiredOption('--issuer <file>', 'the issuer seed file (matrix-tools keys --out, or nsc)')
    .requiredOption('--principal <id>', 'who acts, e.g. agent:alpha or user:ops-ann (Matrix-Principal downstream)')
    .requiredOption('--session <id>', 'the session id (Matrix-Session downstream)')
    .option('--ttl <duration>', 'how long it is valid: 90s, 15m, 1h, 7d', '1h')
    .option('--not-before <duration>', 'not valid until this long from now')
    .option(
      '--user <name>',
      "bind it to its holder: the holder's NATS user (e.g. agent), as nats-server attests it across the agents' account import; others are refused, blind requests too",
    )
    .option('--account <name>', "the NATS account of --user (deploy/nats.conf's AGENTS)", 'AGENTS')
    .option(
      '--inbox <prefix>',
      "bind its replies to its holder: the reply prefix of the holder's NATS user (e.g. _INBOX_agent), for a holder in the service's own account",
    )
    .option('--audience <aud>', 'the deployment it is for (aud), as the service names it in MATRIX_GRANT_AUDIENCE')
    .option('--read-sessions <ids>', 'other sessions whose state session_state_read may read, comma-separated')
    .option(
      '--approve-tools <globs>',
      "an approver's grant: the tools whose approvals it may answer, comma-separated ('*': any)",
    )
    .option(
      '--approve-targets <patterns>',
      "an approver's grant: the target mounts it may answer for, NATS subject patterns ('app.>'), comma-separated",
    )
    .option(
      '--approve-principals <globs>',
      "an approver's grant: whose calls it may answer, comma-separated (never its own)",
    )
    .action((flags: GrantFlags) => exitWith(() => grant(flags, processOutput)));

  program
    .command('keys')
    .description('make an issuer key: its seed into a file (mode 600), its public key (for --trust) on stdout')
    .option('--out <file>', 'where the seed goes; an existing file is never overwritten', 'issuer.nk')
    .action((flags: { out: string }) => exitWith(() => keys(flags.out, processOutput)));
}

/**
 * Runs an offline verb and sets the exit code main.ts exits with; a plain `Error` from reading a
 * seed or a duration is a usage error.
 */
function exitWith(verb: () => number): void {
  try {
    process.exitCode = verb();
  } catch (err) {
    process.exitCode = reportError(
      err instanceof Error && !(err instanceof UsageError) && err.name === 'Error' ? new UsageError(err.message) : err,
    );
  }
}

/** `grant`: prints a grant for the session the flags describe. */
export function grant(flags: GrantFlags, out: Output, env: NodeJS.ProcessEnv = process.env): number {
  if (flags.grant)
    throw new UsageError(
      'grant mints a grant from session flags; --grant / MATRIX_GRANT are for call, resolve and mcp',
    );
  if (!SESSION_ID.test(flags.session)) throw new UsageError('--session must be 1 to 128 of A-Z a-z 0-9 _ . : @ -');
  const request = sessionRequest(flags) as unknown as Record<string, unknown>;
  const resolve = Object.fromEntries(
    AUTHORITY_FIELDS.filter((f) => request[f] !== undefined).map((f) => [f, request[f]]),
  ) as GrantAuthority;
  const readSessions = flags.readSessions
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (readSessions?.some((s) => !SESSION_ID.test(s)))
    throw new UsageError('--read-sessions takes session ids, comma-separated');
  const approve = approveClaim(flags);
  const ttlSeconds = parseDuration(flags.ttl);
  const maxTtl = grantMaxTtlSeconds(env.MATRIX_GRANT_MAX_TTL) ?? DEFAULT_GRANT_MAX_TTL_SECONDS;
  if (ttlSeconds > maxTtl)
    throw new UsageError(
      `--ttl ${flags.ttl} is longer than the ${maxTtl} s a service accepts (MATRIX_GRANT_MAX_TTL, default 24h): it would be refused as too_long`,
    );
  if (flags.inbox !== undefined && !INBOX_PREFIX.test(flags.inbox))
    throw new UsageError('--inbox takes an inbox prefix: tokens of A-Z a-z 0-9 _ - joined by dots (e.g. _INBOX_agent)');
  for (const [flag, name] of [
    ['--user', flags.user],
    ['--account', flags.account],
  ] as const)
    if (name !== undefined && !HOLDER_NAME.test(name))
      throw new UsageError(`${flag} takes a NATS name: 1 to 128 of A-Z a-z 0-9 _ . @ : -`);
  const text = mintGrant(readIssuerSeed(flags.issuer), {
    principal: flags.principal,
    session: flags.session,
    resolve,
    ttlSeconds,
    ...(flags.inbox === undefined ? {} : { inbox: flags.inbox }),
    ...(flags.user === undefined ? {} : { user: flags.user, account: flags.account }),
    ...(flags.audience === undefined ? {} : { audience: flags.audience }),
    ...(flags.notBefore === undefined ? {} : { notBeforeSeconds: parseDuration(flags.notBefore) }),
    ...(readSessions === undefined ? {} : { readSessions }),
    ...(approve === undefined ? {} : { approve }),
  });
  out.print(text);
  if (flags.user === undefined && flags.inbox === undefined)
    out.note(
      `note: this grant is bound to no holder: whoever copies it is served as ${flags.principal} (bind it with --user <its NATS user>, or --inbox <its reply prefix> in the service's own account)`,
    );
  return ExitCode.Ok;
}

/** A NATS subject pattern: tokens, each `*`, `>` (the last) or literal without `*`, `>`, space. */
const SUBJECT_PATTERN = /^(?:(?:\*|[^.*>\s]+)\.)*(?:\*|>|[^.*>\s]+)$/;

/** The `nats.approve` claim the `--approve-*` flags ask for; undefined when none is given. */
export function approveClaim(
  flags: Pick<GrantFlags, 'approveTools' | 'approveTargets' | 'approvePrincipals'>,
): ApproveClaim | undefined {
  const lists: Array<[keyof ApproveClaim, string | undefined, string]> = [
    ['tools', flags.approveTools, '--approve-tools'],
    ['targets', flags.approveTargets, '--approve-targets'],
    ['principals', flags.approvePrincipals, '--approve-principals'],
  ];
  if (lists.every(([, text]) => text === undefined)) return undefined;
  const claim: ApproveClaim = {};
  for (const [field, text, flag] of lists) {
    if (text === undefined) continue;
    const globs = text
      .split(',')
      .map((g) => g.trim())
      .filter(Boolean);
    if (globs.length === 0 || globs.length > 64 || globs.some((g) => g.length > 256))
      throw new UsageError(`${flag} takes 1 to 64 globs of at most 256 characters, comma-separated`);
    const notPattern = field === 'targets' ? globs.find((g) => !SUBJECT_PATTERN.test(g)) : undefined;
    if (notPattern !== undefined)
      throw new UsageError(
        `--approve-targets takes NATS subject patterns ('*' one whole token, '>' the rest, as the policy's target): ${notPattern}`,
      );
    claim[field] = globs;
  }
  return claim;
}

/** `keys`: writes a new issuer seed to `file` (never over one) and prints its public key. */
export function keys(file: string, out: Output): number {
  if (existsSync(file)) throw new UsageError(`${file} exists; keys never overwrites a seed (choose another --out)`);
  const key = newIssuerKey();
  writeFileSync(file, `${key.seed}\n`, { mode: 0o600, flag: 'wx' });
  out.note(`seed written to ${file} (keep it secret); trust it with --trust / MATRIX_TRUSTED_ISSUERS=${key.publicKey}`);
  out.print(key.publicKey);
  return ExitCode.Ok;
}
