/**
 * `matrix-tools revoke`: revokes a grant (`--grant FILE`, or `--jti`) or every grant of a
 * principal issued until now (`--principal`) through `system.tools.$revoke`; every instance
 * refuses them (`revoked`) within a second. Operator only under deploy/nats.conf.
 */
import type { BusClient } from '../bus/client.js';
import { Mounts } from '../bus/subjects.js';
import { loadGrant, readGrantClaims } from '../identity/granted.js';
import type { RevokeReply, RevokeRequest } from '../identity/revocations.js';
import { ExitCode, type Output, UsageError } from './output.js';

/** Flags of `revoke`. */
export interface RevokeArgs {
  grant?: string;
  jti?: string;
  principal?: string;
  reason?: string;
  until?: string;
}

/** The `$revoke` request the flags ask for: exactly one of --grant, --jti, --principal. */
export function revokeRequest(args: RevokeArgs): RevokeRequest {
  const named = [args.grant, args.jti, args.principal].filter((v) => v !== undefined);
  if (named.length !== 1)
    throw new UsageError('revoke takes exactly one of --grant <file>, --jti <id>, --principal <id>');
  const request: RevokeRequest = {};
  if (args.grant !== undefined) {
    const claims = readGrantClaims(loadGrant(args.grant));
    if (typeof claims.jti !== 'string') throw new UsageError(`${args.grant} is a grant without a jti`);
    request.jti = claims.jti;
    // It ends when the grant would have.
    if (Number.isSafeInteger(claims.exp)) request.until = new Date(claims.exp * 1000).toISOString();
  }
  if (args.jti !== undefined) request.jti = args.jti;
  if (args.principal !== undefined) request.sub = args.principal;
  if (args.reason !== undefined) request.reason = args.reason;
  if (args.until !== undefined) request.until = args.until;
  return request;
}

/** `revoke`: sends the revocation, prints what was stored. */
export async function revoke(client: BusClient, args: RevokeArgs, out: Output): Promise<number> {
  const reply = await client.request<RevokeReply>(Mounts.Tools, '$revoke', revokeRequest(args), { timeoutMs: 10_000 });
  out.print(`revoked ${reply.key} until ${reply.until} (revision ${reply.revision})`);
  return ExitCode.Ok;
}
