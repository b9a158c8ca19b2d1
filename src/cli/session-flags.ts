/** The session flags of `resolve`, `call` and `mcp`, and the `$resolve` request they describe. */

import { type Command, Option } from 'commander';
import { decodeProtectedHeader } from 'jose';
import type { CallContext } from '../bus/context.js';
import { GrantedSession, loadGrant } from '../identity/granted.js';
import type { ResolveRequest } from '../registry/types.js';
import { jsonFlag, UsageError } from './output.js';

/** Flags that pick a session (the `$resolve` request behind `resolve`, `call` and `mcp`). */
export interface SessionFlags {
  /** Required unless `grant` gives it. */
  profile?: string;
  /**
   * A session grant (its text or a file), `--grant` / `MATRIX_GRANT`: sent as `Matrix-Grant`, its
   * authority the request's.
   */
  grant?: string;
  worker?: string;
  refs?: string;
  skill?: string[];
  requires?: string;
  environment?: string;
  format?: string;
  onlyAvailable?: boolean;
  strict?: boolean;
}

/** Adds the session flags to a command. */
export function withSession(cmd: Command): Command {
  return cmd
    .option(
      '-p, --profile <name>',
      'agent profile (default, explain, monitor, edit, propose, evaluate, …); required without --grant',
    )
    .addOption(
      new Option(
        '--grant <jwt|file>',
        'session grant sent as Matrix-Grant; its profile and authority are the session (env: MATRIX_GRANT)',
      ).env('MATRIX_GRANT'),
    )
    .option('-w, --worker <name>', 'worker, e.g. claude-code or codex')
    .option('--refs <keys>', 'tool context refs, comma-separated (skips the built-in rules)')
    .option(
      '--skill <name=refs>',
      'a skill and its refs, e.g. review=repo-coding (repeatable)',
      (v: string, prev: string[] = []) => [...prev, v],
    )
    .option('--requires <capabilities>', 'required capabilities, comma-separated')
    .option('--environment <json>', 'the worker environment, e.g. {"repoRoot":"/src"}')
    .option('--only-available', 'leave out tools whose target has no live instance');
}

const csv = (text: string | undefined) =>
  text === undefined
    ? undefined
    : text
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);

/** The `$resolve` request the flags describe. */
export function sessionRequest(flags: SessionFlags): ResolveRequest {
  // With a grant, its authority; flags given besides are sent too, for the service to hold against it.
  // An access token's authority is the service's claims mapping, unknown here: the flags say it.
  const grant = flags.grant ? loadGrant(flags.grant) : undefined;
  const request: ResolveRequest =
    grant !== undefined && !isAccessToken(grant) ? { ...new GrantedSession(grant).request } : { profile: '' };
  if (flags.profile) request.profile = flags.profile;
  if (!request.profile)
    throw new UsageError(
      grant === undefined
        ? '--profile is required (or --grant / MATRIX_GRANT, whose profile is used)'
        : '--profile is required with an access token as --grant (the service maps its claims to a profile)',
    );
  if (flags.worker) request.worker = flags.worker;
  const refs = csv(flags.refs);
  if (refs) request.toolContextRefs = refs;
  if (flags.skill?.length) request.skills = flags.skill.map(skillOf);
  const requires = csv(flags.requires);
  if (requires) request.requires = requires;
  if (flags.environment)
    request.environment = jsonFlag('--environment', flags.environment) as ResolveRequest['environment'];
  if (flags.format) request.format = flags.format as ResolveRequest['format'];
  if (flags.onlyAvailable) request.onlyAvailable = true;
  if (flags.strict) request.strict = true;
  return request;
}

/**
 * Is `text` an OAuth access token (a JWT of an identity provider, PROTOCOL 14) rather than an
 * nkey-signed grant? Read from its header, unverified: the service verifies it.
 */
function isAccessToken(text: string): boolean {
  try {
    return decodeProtectedHeader(text).alg !== 'ed25519-nkey';
  } catch {
    return false;
  }
}

/** One `--skill name=ref1,ref2`. */
function skillOf(text: string): NonNullable<ResolveRequest['skills']>[number] {
  const [name, list] = text.split('=', 2);
  if (!name) throw new UsageError(`--skill takes name=ref1,ref2, got '${text}'`);
  const refs = csv(list);
  return refs ? { name, toolContextRefs: refs } : { name };
}

/** The `Matrix-Grant` header the flags ask for, if any. */
export function grantContext(flags: { grant?: string }): Pick<CallContext, 'grant'> {
  return flags.grant ? { grant: loadGrant(flags.grant) } : {};
}
