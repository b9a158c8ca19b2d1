/**
 * A session under a grant, as the CLI, the MCP bridge and `openToolSession` (src/oracle/) read
 * it: its `$resolve` request is the grant's authority, and its calls carry the grant. Without a
 * verifier the claims are read unchecked: `system.tools` and `system.dispatcher` check the
 * grant they receive; a bridge that takes grants from callers it does not trust passes a
 * `GrantVerifier` to refuse a bad one before it asks them.
 */
import { readFileSync } from 'node:fs';
import type { BusClient } from '../bus/client.js';
import type { CallContext } from '../bus/context.js';
import { Mounts } from '../bus/subjects.js';
import type { ToolCall, ToolResult } from '../dispatcher/types.js';
import type { ResolvedToolContext, ResolveRequest } from '../registry/types.js';
import { splitGrant } from './jwt.js';
import type { GrantClaims } from './types.js';
import { type GrantVerifier, INBOX_PREFIX } from './verify.js';

/** How the session's tools are presented (the caller's to choose). */
export type Presentation = Pick<ResolveRequest, 'format' | 'strict' | 'onlyAvailable'>;

/** The claims of a grant, unverified (for showing, and for building the request it allows). */
export function readGrantClaims(grant: string): GrantClaims {
  return splitGrant(grant.trim()).claims as unknown as GrantClaims;
}

/**
 * The inbox prefix a grant's holder takes replies on: its `nats.inbox`, else `_INBOX_<nats.user>`
 * (deploy/nats.conf gives each agent user that prefix); undefined for an unbound grant or claims
 * that cannot say.
 */
export function holderInbox(claims: Partial<GrantClaims> | undefined): string | undefined {
  const nats = claims?.nats as { inbox?: unknown; user?: unknown } | undefined;
  if (typeof nats?.inbox === 'string') return nats.inbox;
  const inbox = typeof nats?.user === 'string' ? `_INBOX_${nats.user}` : undefined;
  return inbox !== undefined && INBOX_PREFIX.test(inbox) ? inbox : undefined;
}

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/** A grant given on a command line or in `MATRIX_GRANT`: its text, or the path of a file that holds it. */
export function loadGrant(value: string): string {
  const text = value.trim();
  return JWT_SHAPE.test(text) ? text : readFileSync(text, 'utf8').trim();
}

/** A session whose identity and authority come from a grant. */
export class GrantedSession {
  /** The grant's text. */
  readonly grant: string;
  /** The `$resolve` request the grant allows, with the presentation asked for. */
  readonly request: ResolveRequest;
  readonly principal: string;
  readonly session: string;
  /** When the grant expires (its `exp`), Unix ms. */
  readonly expiresAtMs: number;

  /** Reads the grant; with a verifier, checks it first (a `GrantError` when it fails). */
  constructor(grant: string, presentation: Presentation = {}, verifier?: GrantVerifier) {
    this.grant = grant.trim();
    const claims = verifier === undefined ? readGrantClaims(this.grant) : verifier.verify(this.grant).claims;
    this.request = { ...claims.nats.resolve, ...presentation };
    this.principal = claims.sub;
    this.session = claims.nats.session;
    this.expiresAtMs = claims.exp * 1000;
  }

  /** The context of a call: the grant, and the principal and session it names. */
  context(ctx: CallContext = {}): CallContext {
    return { ...ctx, grant: this.grant, principal: this.principal, session: this.session };
  }

  /** `system.tools.$resolve` for this session. */
  resolve(client: BusClient, ctx?: CallContext): Promise<ResolvedToolContext> {
    return client.request<ResolvedToolContext>(Mounts.Tools, '$resolve', this.request, this.context(ctx));
  }

  /** Runs one tool call through `system.dispatcher.$call` (what an agent may reach). */
  callRemote(client: BusClient, call: ToolCall, ctx?: CallContext & { timeoutMs?: number }): Promise<ToolResult> {
    return client.request<ToolResult>(Mounts.Dispatcher, '$call', { session: this.request, call }, this.context(ctx));
  }
}
