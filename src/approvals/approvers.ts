/**
 * Who may list and answer pending approvals (PROTOCOL 8). Where the service trusts issuers,
 * only the holder of a grant whose `nats.approve` claim covers the call, and never for a call of
 * its own principal; the answer's `by` is the grant's `sub`. In development (no issuers) anyone
 * may, and `by` is the principal the caller claims.
 */
import type { CallContext } from '../bus/context.js';
import { ForbiddenError } from '../bus/errors.js';
import { subjectMatches } from '../bus/subjects.js';
import type { IdentityGate } from '../identity/gate.js';
import { samePrincipal } from '../identity/principal.js';
import type { ApproveClaim } from '../identity/types.js';
import { globMatches, principalMatches } from './policy.js';
import type { PendingApproval } from './types.js';

/** Who answers: the name an answer is recorded under, and which approvals they may answer. */
export interface Approver {
  /** The grant's `sub`; in development the claimed principal, or `anonymous`. */
  by: string;
  /** The approvals the grant covers; undefined in development (every approval). */
  covers: ApproveClaim | undefined;
}

/** The `by` of an answer in development from a caller that claims no principal. */
export const ANONYMOUS = 'anonymous';

/** The approver a request comes from; `ForbiddenError` without a valid grant that carries `nats.approve`. */
export function approverOf(identity: IdentityGate, ctx: CallContext): Approver {
  // A missing or invalid grant is a GrantError: a forbidden naming the check it failed.
  const grant = identity.verify(ctx.grant);
  if (grant === undefined) return { by: ctx.principal ?? ANONYMOUS, covers: undefined };
  const covers = grant.claims.nats.approve;
  if (covers === undefined)
    throw new ForbiddenError(
      `the grant of ${grant.claims.sub} carries no nats.approve claim: it may not list or answer approvals (mint one with matrix-tools grant --approve-tools …)`,
    );
  return { by: grant.claims.sub, covers };
}

/** May this approver answer this approval: covered by its claim, and not a call of its own? */
export function mayAnswer(approver: Approver, approval: PendingApproval): boolean {
  return isOwn(approver, approval) ? false : covered(approver.covers, approval);
}

/** Is it the approver's own call (no principal approves its own, under any spelling of it)? */
export function isOwn(approver: Approver, approval: PendingApproval): boolean {
  return samePrincipal(approval.principal, approver.by);
}

/**
 * Does every list of the claim that is present match the call? `tools` and `principals` are
 * globs (principals compared as `principalKey` folds them); `targets` are NATS subject patterns, as the policy's `target` (`app.*` one token,
 * `app.>` every mount under `app`). (Development: no claim, every call.)
 */
export function covered(claim: ApproveClaim | undefined, approval: PendingApproval): boolean {
  if (claim === undefined) return true;
  return (
    (claim.tools === undefined || claim.tools.some((g) => globMatches(g, approval.tool))) &&
    (claim.targets === undefined || claim.targets.some((p) => subjectMatches(p, approval.target))) &&
    (claim.principals === undefined || claim.principals.some((g) => principalMatches(g, approval.principal)))
  );
}
