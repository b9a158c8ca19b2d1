/**
 * Where identity is decided for `$call` and `$resolve`: with trusted issuers, only a verified
 * grant says who calls, for which session, with which authority, whatever the caller's body and
 * headers say; without them (development), the caller is trusted, as before grants existed.
 */
import type { CallContext } from '../bus/context.js';
import type { ResolveRequest } from '../registry/types.js';
import { grantedRequest } from './authorize.js';
import { GrantError } from './errors.js';
import {
  describeServer,
  holderBindingOn,
  type NatsServerReport,
  natsServerReport,
  REQUEST_INFO_CVE,
  REQUEST_INFO_CVES,
} from './nats-server.js';
import { GrantFailure, type VerifiedGrant } from './types.js';
import { GrantVerifier, type GrantVerifierOptions, signedFor } from './verify.js';

/** What the gate is told beside the verifier's options. */
export interface IdentityGateOptions extends GrantVerifierOptions {
  /**
   * Serve grants bound by `nats.user` on a nats-server without the fixes for CVE-2026-33223 and
   * CVE-2026-33246 (`--allow-unsafe-nats`, `MATRIX_ALLOW_UNSAFE_NATS`); default false: refused there.
   */
  allowUnsafeNats?: boolean;
}

/** A request admitted: what to resolve, and the context to act under downstream. */
export interface Admitted {
  request: ResolveRequest;
  ctx: CallContext;
}

/** Admits requests by grant (trusted issuers given) or trusts callers (none). */
export class IdentityGate {
  private constructor(
    private readonly verifier: GrantVerifier | undefined,
    /** `--allow-unsafe-nats`: holder binding served on a server that cannot guarantee it. */
    readonly allowUnsafeNats: boolean,
  ) {}

  /** Development: the caller's body and headers are taken as they are. */
  static trustingCallers(): IdentityGate {
    return new IdentityGate(undefined, false);
  }

  /** Grants from these issuers (public nkeys) only; with none, trusting callers. */
  static forIssuers(issuers: readonly string[], options: IdentityGateOptions = {}): IdentityGate {
    return new IdentityGate(
      issuers.length === 0 ? undefined : new GrantVerifier(issuers, options),
      options.allowUnsafeNats === true,
    );
  }

  /** Grants of these nkey issuers and of the OIDC issuers `options.oidc` trusts (either may be none). */
  static forGrants(issuers: readonly string[], options: IdentityGateOptions): IdentityGate {
    return new IdentityGate(new GrantVerifier(issuers, options), options.allowUnsafeNats === true);
  }

  /** The ready line's (and a reconnect line's) word on the nats-server of `version`. */
  describeServer(version: string | undefined): string {
    return describeServer(version, this.allowUnsafeNats);
  }

  /** `$introspect`'s `natsServer`: the server of `version`, and what a grant bound by `nats.user` meets there. */
  natsServer(version: string | undefined): NatsServerReport {
    return natsServerReport(version, this.allowUnsafeNats);
  }

  /** Does this gate trust callers (no issuers)? */
  get trusting(): boolean {
    return this.verifier === undefined;
  }

  /**
   * What an operator should hear at start about identity, if anything: trusting issuers without an
   * audience, a grant minted for any deployment of theirs is good here.
   */
  warning(): string | undefined {
    if (this.verifier === undefined || this.verifier.requiredAudience !== undefined) return undefined;
    return 'warning: issuers are trusted with no audience (MATRIX_GRANT_AUDIENCE unset): a grant of theirs without aud is good here, whichever deployment it was minted for; set MATRIX_GRANT_AUDIENCE and mint grants with --audience';
  }

  /** The ready line's word on identity: development, or the issuers whose grants it trusts. */
  describe(): string {
    return this.verifier === undefined
      ? 'identity: trusting callers (development)'
      : `identity: grants from ${this.verifier.issuers} issuer(s): ${this.verifier.issuerKeys.join(', ')}`;
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
   * and a cache lookup. A grant bound to its holder holds only for that holder (`wrong_holder`):
   * with `nats.user`, the sender nats-server attests in the `Nats-Request-Info` of the request's
   * last header line (`requestInfo`, parsed only for such a grant); with only `nats.inbox`, a
   * reply subject under that prefix. `server` is the version of the nats-server the request came
   * through (its INFO's, read per request, so a reconnect to another server counts): one without
   * the fixes for CVE-2026-33223 and CVE-2026-33246, or none given, cannot vouch for a sender, and
   * a grant bound by `nats.user` is refused there (`unsafe_server`) unless `allowUnsafeNats`.
   * The verified grant stays cached for `admit`. A no-op when trusting callers.
   */
  checkGrant(ctx: CallContext, reply: string | undefined, requestInfo?: string, server?: string): void | Promise<void> {
    const verifier = this.verifier;
    if (verifier === undefined) return;
    if (verifier.needsAsync(ctx.grant))
      return verifier
        .verifyAsync(ctx.grant)
        .then((grant) => this.checkHolder(grant, reply, requestInfo, server))
        .catch((err: unknown) => {
          throw failClosed(err);
        });
    try {
      this.checkHolder(verifier.verify(ctx.grant), reply, requestInfo, server);
    } catch (err) {
      throw failClosed(err);
    }
  }

  /** The holder check of `checkGrant`, on a verified grant. */
  private checkHolder(
    grant: VerifiedGrant,
    reply: string | undefined,
    requestInfo: string | undefined,
    server: string | undefined,
  ): void {
    const { user, account, inbox } = grant.claims.nats;
    if (user !== undefined) {
      if (holderBindingOn(server, this.allowUnsafeNats) === 'refused')
        throw signedFor(unsafeServer(server), grant.claims);
      const sender = attestedSender(requestInfo);
      if (sender === undefined || sender.user !== user || (account !== undefined && sender.acc !== account))
        throw signedFor(notTheUser(user, account, sender), grant.claims);
    } else if (inbox !== undefined && !(reply?.startsWith(inbox) && reply[inbox.length] === '.')) {
      throw signedFor(notTheInbox(inbox, reply), grant.claims);
    }
  }

  /** `checkGrant` bound to this gate, as every op that needs a grant gives it for its `beforeBody`. */
  readonly beforeBody = (
    ctx: CallContext,
    reply: string,
    requestInfo: string | undefined,
    server: string | undefined,
  ): void | Promise<void> => this.checkGrant(ctx, reply, requestInfo, server);

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

  /**
   * Why a grant that held when its call was admitted no longer does (revoked or expired since),
   * or undefined while it holds; always undefined when trusting callers.
   */
  lapsed(grant: string | undefined): GrantError | undefined {
    if (this.verifier === undefined) return undefined;
    try {
      if (this.verifier.needsAsync(grant)) return this.verifier.lapsedUnverified(grant as string);
      this.verifier.verify(grant);
      return undefined;
    } catch (err) {
      if (err instanceof GrantError) return err;
      throw err;
    }
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

/** Longest `Nats-Request-Info` read, in characters: nats-server's ClientInfo is a few hundred. */
const MAX_REQUEST_INFO = 4_096;

/**
 * The account and user a `Nats-Request-Info` value names; undefined when it is absent or not one
 * ClientInfo JSON object, as nats-server writes it. A value a client left unterminated, which the
 * server's own is then joined to, is no JSON at all (and the request's reader keeps only the
 * block's last line, the server's). Parsed (1.3-2.3 us for its ~280 characters) only for a grant
 * bound to its user; nothing is kept.
 */
function attestedSender(requestInfo: string | undefined): { acc?: string; user?: string } | undefined {
  if (requestInfo === undefined || requestInfo.length > MAX_REQUEST_INFO || requestInfo[0] !== '{') return undefined;
  try {
    const info: unknown = JSON.parse(requestInfo);
    if (info === null || typeof info !== 'object' || Array.isArray(info)) return undefined;
    const { acc, user } = info as { acc?: unknown; user?: unknown };
    return { acc: typeof acc === 'string' ? acc : undefined, user: typeof user === 'string' ? user : undefined };
  } catch {
    return undefined;
  }
}

/** What a name the sender chose looks like in a refusal: short, quoted. */
const shown = (name: string | undefined) => JSON.stringify((name ?? '').slice(0, 64));

function notTheUser(user: string, account: string | undefined, sender: { acc?: string; user?: string } | undefined) {
  const holder = account === undefined ? `NATS user ${user}` : `NATS user ${user} of account ${account}`;
  const why =
    sender === undefined
      ? 'nats-server attests no sender on this request (it names one only on a request that crossed a service import with share: true, as the agents account of deploy/nats.conf does)'
      : `this request's sender is user ${shown(sender.user)} of account ${shown(sender.acc)}, as nats-server attests it`;
  return new GrantError(
    GrantFailure.WrongHolder,
    `Matrix-Grant is bound to ${holder}: ${why}, so it is not its holder's`,
  );
}

function unsafeServer(server: string | undefined) {
  return new GrantError(
    GrantFailure.UnsafeServer,
    `Matrix-Grant is bound to a NATS user, but nats-server ${server ?? '(no version)'} lacks the fixes for ${REQUEST_INFO_CVES}: ` +
      `any client can forge the Nats-Request-Info that names its holder there (${REQUEST_INFO_CVE}), so it is refused; ` +
      'upgrade nats-server (2.14 or newer), or run the service with --allow-unsafe-nats',
  );
}

function notTheInbox(inbox: string, reply: string | undefined) {
  const imported = reply?.startsWith('_R_.')
    ? ' (the request crossed an account import, whose reply subjects the server rewrites: bind the grant with nats.user, --user)'
    : '';
  return new GrantError(
    GrantFailure.WrongHolder,
    `Matrix-Grant is bound to the NATS user whose replies come on ${inbox}: this request's do not${imported}, so it is not its holder's`,
  );
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
