/**
 * Where identity is decided for `$call` and `$resolve`: with trusted issuers, only a verified
 * grant says who calls, for which session, with which authority, whatever the caller's body and
 * headers say; without them (development), the caller is trusted, as before grants existed.
 */
import type { CallContext } from '../bus/context.js';
import type { ResolveRequest } from '../registry/types.js';
import { grantedRequest } from './authorize.js';
import { GrantError } from './errors.js';
import { GrantFailure, type VerifiedGrant } from './types.js';
import { GrantVerifier, type GrantVerifierOptions, signedFor } from './verify.js';

/** A request admitted: what to resolve, and the context to act under downstream. */
export interface Admitted {
  request: ResolveRequest;
  ctx: CallContext;
}

/** Admits requests by grant (trusted issuers given) or trusts callers (none). */
export class IdentityGate {
  private constructor(private readonly verifier: GrantVerifier | undefined) {}

  /** Development: the caller's body and headers are taken as they are. */
  static trustingCallers(): IdentityGate {
    return new IdentityGate(undefined);
  }

  /** Grants from these issuers (public nkeys) only; with none, trusting callers. */
  static forIssuers(issuers: readonly string[], options?: GrantVerifierOptions): IdentityGate {
    return new IdentityGate(issuers.length === 0 ? undefined : new GrantVerifier(issuers, options));
  }

  /** Does this gate trust callers (no issuers)? */
  get trusting(): boolean {
    return this.verifier === undefined;
  }

  /** The ready line's word on identity. */
  describe(): string {
    return this.verifier === undefined
      ? 'identity: trusting callers (development)'
      : `identity: grants from ${this.verifier.issuers} issuer(s)`;
  }

  /**
   * The request and context to act on; a `GrantError` (forbidden) when the grant is missing,
   * invalid, or the body asks for other authority. The grant's principal and session replace
   * the caller's headers; its read sessions replace theirs. `onRefused` hears each refusal first.
   */
  admit(body: ResolveRequest, ctx: CallContext, onRefused?: (err: GrantError) => void): Admitted {
    if (this.verifier === undefined) return { request: body, ctx };
    try {
      return this.admitByGrant(this.verifier, body, ctx);
    } catch (err) {
      const refusal = failClosed(err);
      onRefused?.(refusal);
      throw refusal;
    }
  }

  /**
   * Who calls, for ops that act on what a caller owns (`system.tasks`): the principal and session
   * of a valid grant; a `GrantError` (forbidden) without one. Trusting callers: their headers.
   */
  owner(ctx: CallContext): { principal?: string; session?: string } {
    if (this.verifier === undefined) return { principal: ctx.principal, session: ctx.session };
    try {
      const { sub, nats } = this.verifier.verify(ctx.grant).claims;
      return { principal: sub, session: nats.session };
    } catch (err) {
      throw failClosed(err);
    }
  }

  /**
   * Refuses a request whose grant is missing or not valid (`GrantError`), from its headers
   * alone: run before its body is read, so a caller without a valid grant costs one header read
   * and a cache lookup. A grant bound to its holder (`nats.inbox`) holds only for a request whose
   * reply subject is under that prefix (`wrong_holder`). The verified grant stays cached for
   * `admit`. A no-op when trusting callers.
   */
  checkGrant(ctx: CallContext, reply: string | undefined): void {
    if (this.verifier === undefined) return;
    try {
      const grant = this.verifier.verify(ctx.grant);
      const inbox = grant.claims.nats.inbox;
      if (inbox !== undefined && !(reply?.startsWith(inbox) && reply[inbox.length] === '.')) {
        throw signedFor(
          new GrantError(
            GrantFailure.WrongHolder,
            `Matrix-Grant is bound to the NATS user whose replies come on ${inbox}: this request's do not, so it is not its holder's`,
          ),
          grant.claims,
        );
      }
    } catch (err) {
      throw failClosed(err);
    }
  }

  /**
   * Whom a valid grant names, for a request refused before its grant was checked (an invalid
   * body); undefined for a grant that is missing or not valid, or when trusting callers.
   */
  holder(grant: string | undefined): { principal: string; session: string } | undefined {
    if (this.verifier === undefined || grant === undefined) return undefined;
    try {
      const { sub, nats } = this.verifier.verify(grant).claims;
      return { principal: sub, session: nats.session };
    } catch {
      return undefined;
    }
  }

  /**
   * The verified grant of an op that needs one of its own (an approver's): a `GrantError` when
   * it is missing or not valid; undefined when trusting callers (there are no grants to check).
   */
  verify(grant: string | undefined): VerifiedGrant | undefined {
    return this.verifier?.verify(grant);
  }

  private admitByGrant(verifier: GrantVerifier, body: ResolveRequest, ctx: CallContext): Admitted {
    const grant = verifier.verify(ctx.grant);
    const { sub, nats } = grant.claims;
    const admitted: CallContext = {
      traceparent: ctx.traceparent,
      deadline: ctx.deadline,
      session: nats.session,
      principal: sub,
      grant: grant.text,
    };
    if (nats.readSessions !== undefined && nats.readSessions.length > 0)
      admitted.readSessions = nats.readSessions.join(',');
    try {
      return { request: grantedRequest(grant, body), ctx: admitted };
    } catch (err) {
      throw err instanceof GrantError ? signedFor(err, grant.claims) : err;
    }
  }
}

/** Fail closed: whatever went wrong admitting a call, it is refused, and told. */
function failClosed(err: unknown): GrantError {
  return err instanceof GrantError
    ? err
    : new GrantError(
        GrantFailure.Malformed,
        `Matrix-Grant could not be checked (${(err as Error)?.name ?? 'error'}): it is refused`,
      );
}

/** Trusted issuers from `MATRIX_TRUSTED_ISSUERS` / `--trust`: public nkeys, comma-separated. */
export function parseIssuers(text: string | undefined): string[] {
  return (text ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}
