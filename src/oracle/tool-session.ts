/**
 * An oracle's session: the tools of one `$resolve` request (a grant's, or a profile's where the
 * service trusts callers), offered to an LLM in its provider's format, and its tool calls run
 * through `system.dispatcher.$call` with the grant. Never an in-process dispatcher: an oracle
 * runs as an agent, which under deploy/nats.conf may reach `system.dispatcher` and the
 * registry's read ops only.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient } from '../bus/client.js';
import { type ConnectOptions, connectBus, connectOptionsFromEnv } from '../bus/connect.js';
import type { CallContext } from '../bus/context.js';
import { MatrixError } from '../bus/errors.js';
import { Mounts } from '../bus/subjects.js';
import { errorResult, failure } from '../dispatcher/results.js';
import type { ToolResult } from '../dispatcher/types.js';
import { GrantedSession, holderInbox, loadGrant, readGrantClaims } from '../identity/granted.js';
import { recheckOnChange } from '../registry/events.js';
import { providerToolsOf } from '../registry/provider-formats.js';
import type { ProviderToolsByFormat } from '../registry/provider-tools.js';
import type { ProviderFormat, ResolvedTool, ResolvedToolContext, ResolveRequest } from '../registry/types.js';
import { type CallOptions, runCall } from './call.js';
import { type AnyToolCall, toToolCall } from './tool-calls.js';

/** The authority of a session without a grant: a `$resolve` request less its presentation fields. */
export type SessionRequest = Omit<ResolveRequest, 'format' | 'strict' | 'onlyAvailable'>;

/**
 * How `openToolSession` opens a session. Connection fields not given come from the `NATS_*`
 * environment; the inbox prefix, when not given, from the grant's holder (`nats.inbox`, else `_INBOX_<nats.user>`).
 */
export interface ToolSessionOptions<F extends ProviderFormat = 'matrix'> extends ConnectOptions {
  /**
   * The session grant (its text, or a file holding it): its claims are the session, and every
   * request carries it in `Matrix-Grant`. Default `MATRIX_GRANT` when `session` is not given.
   */
  grant?: string;
  /** Without a grant (a service that trusts callers): the profile and the rest of the request. */
  session?: SessionRequest;
  /** A connection to use (left open by `close`); default: one opened from the options and the environment. */
  nc?: NatsConnection;
  /** The format of `providerTools`; default `matrix` (none: `tools` are the projections). */
  format?: F;
  /** OpenAI strict mode where the schema allows (`strict_unavailable` diagnostics say where not); default false. */
  strict?: boolean;
  /** Leave out tools whose target has no live instance; default false. */
  onlyAvailable?: boolean;
  /** Longest wait for one plain call, in ms (an approver may take up to a minute); default 95000. */
  callTimeoutMs?: number;
  /** Longest wait for the registry, in ms; default 10000. */
  resolveTimeoutMs?: number;
}

/** Longest wait for one plain call: an approver may take up to a minute, then the tool its timeout. */
const CALL_TIMEOUT_MS = 95_000;
const RESOLVE_TIMEOUT_MS = 10_000;

/** Resolves the session's tools and returns it open; the connection is its own unless `nc` was given. */
export async function openToolSession<F extends ProviderFormat = 'matrix'>(
  options: ToolSessionOptions<F> = {},
): Promise<ToolSession<F>> {
  const grantText = options.grant ?? (options.session === undefined ? process.env.MATRIX_GRANT : undefined);
  const format = options.format ?? ('matrix' as const);
  const presentation = { format, strict: options.strict === true, onlyAvailable: options.onlyAvailable === true };
  let request: ResolveRequest;
  let ctx: CallContext = {};
  let inbox: string | undefined;
  if (grantText) {
    const grant = loadGrant(grantText);
    const granted = new GrantedSession(grant, presentation);
    request = granted.request;
    ctx = granted.context();
    // A grant bound to its holder is answered only on its holder's inbox prefix: use that one.
    inbox = holderInbox(readGrantClaims(grant));
  } else if (options.session !== undefined) {
    request = { ...options.session, ...presentation };
  } else {
    throw new TypeError('openToolSession needs a grant (options.grant or MATRIX_GRANT) or a session {profile, …}');
  }
  const own = options.nc === undefined;
  const connect: ConnectOptions = { ...connectOptionsFromEnv(), ...connectionFields(options) };
  if (inbox !== undefined && options.inboxPrefix === undefined) connect.inboxPrefix = inbox;
  const nc = options.nc ?? (await connectBus(connect));
  const client = new BusClient(nc, { timeoutMs: options.resolveTimeoutMs ?? RESOLVE_TIMEOUT_MS });
  try {
    const first = await client.request<ResolvedToolContext>(Mounts.Tools, '$resolve', request, ctx);
    return new ToolSession(format as F, client, request, ctx, first, own, options.callTimeoutMs ?? CALL_TIMEOUT_MS);
  } catch (err) {
    client.close();
    if (own) await nc.close();
    throw err;
  }
}

/** The connection fields of the options, those given only. */
function connectionFields(options: ConnectOptions): ConnectOptions {
  const out: ConnectOptions = {};
  for (const key of ['servers', 'name', 'user', 'pass', 'token', 'nkeyFile', 'credsFile', 'inboxPrefix'] as const) {
    const value = options[key];
    if (value !== undefined) out[key] = value;
  }
  return out;
}

/** Told the session after its tools changed (a new digest). */
export type ChangeListener<F extends ProviderFormat> = (session: ToolSession<F>) => void;

/** An open session: its tools for the model, and the way to run the model's calls. */
export class ToolSession<F extends ProviderFormat = 'matrix'> {
  private resolved: ResolvedToolContext;
  private rendered: ProviderToolsByFormat[F];
  private readonly listeners = new Set<ChangeListener<F>>();
  private stopWatching: (() => void) | undefined;
  private closed = false;

  /** @internal Made by `openToolSession`. */
  constructor(
    /** The format `providerTools` are in. */
    readonly format: F,
    /** The session's client (its connection: `client.nc`). */
    readonly client: BusClient,
    /** The `$resolve` request of the session: the grant's authority with the presentation asked for. */
    readonly request: ResolveRequest,
    /** What every request carries: the grant, and the principal and session it names. */
    readonly context: CallContext,
    first: ResolvedToolContext,
    private readonly ownsConnection: boolean,
    private readonly callTimeoutMs: number,
  ) {
    this.resolved = first;
    this.rendered = this.render(first);
  }

  /** The resolved projections, as the dispatcher runs them. */
  get tools(): readonly ResolvedTool[] {
    return this.resolved.matrixTools;
  }

  /** The merged contexts' instructions, for the system prompt. */
  get instructions(): string {
    return this.resolved.instructions;
  }

  /** The resolution's digest: equal while the session's tools are the same. */
  get digest(): string {
    return this.resolved.digest;
  }

  /** The whole `$resolve` reply (contexts, diagnostics, revision…). */
  get resolution(): ResolvedToolContext {
    return this.resolved;
  }

  /** The tools in the session's provider format (`undefined` for `matrix`). */
  get providerTools(): ProviderToolsByFormat[F] {
    return this.rendered;
  }

  /** One tool by name, or undefined when the session has none of that name. */
  tool(name: string): ResolvedTool | undefined {
    return this.resolved.matrixTools.find((t) => t.name === name);
  }

  /**
   * Runs one of the model's tool calls, in any accepted shape, through `system.dispatcher.$call`.
   * A failed tool is a result with `isError` (what the model reads), and so is a call the bus
   * refused (`error.code` the bus's: `payload_too_large`, `bad_request` for a body too deep to
   * send, `forbidden` for a grant expired or revoked since the session opened, `timeout`,
   * `unavailable`); a call aborted by `signal` rejects with the signal's reason. With `task` (or
   * for a tool whose `execution.taskSupport` is `required`) it runs as a task and waits for its
   * result, reporting progress.
   */
  async call(toolCall: AnyToolCall, options: CallOptions = {}): Promise<ToolResult> {
    if (this.closed) throw new Error('the tool session is closed');
    const call = toToolCall(toolCall);
    try {
      return await runCall(
        this.client,
        this.request,
        call,
        this.context,
        this.callTimeoutMs,
        this.tool(call.name),
        options,
      );
    } catch (err) {
      // The bus's own refusals are failed calls too: every adapter hands them to the model alike.
      if (err instanceof MatrixError && options.signal?.aborted !== true)
        return errorResult(call.id, call.name, failure.dispatcherAnswered(call.name, err));
      throw err;
    }
  }

  /** Resolves again; tells the listeners and resolves `true` when the digest changed. */
  async refresh(): Promise<boolean> {
    const next = await this.client.request<ResolvedToolContext>(Mounts.Tools, '$resolve', this.request, this.context);
    if (next.digest === this.resolved.digest) {
      this.resolved = next;
      return false;
    }
    this.resolved = next;
    this.rendered = this.render(next);
    for (const listener of this.listeners) listener(this);
    return true;
  }

  /**
   * Calls `listener` each time the session's tools change (registry changes that leave its
   * digest alone are not told); returns a function that stops it.
   */
  onChange(listener: ChangeListener<F>): () => void {
    this.listeners.add(listener);
    // A failed resolve leaves the last tools in place: the next change tries again.
    this.stopWatching ??= recheckOnChange(this.client.nc, async () => {
      if (!this.closed) await this.refresh().catch(() => false);
    });
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) {
        this.stopWatching?.();
        this.stopWatching = undefined;
      }
    };
  }

  /** Stops watching and closes the client; the connection too when the session opened it. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopWatching?.();
    this.listeners.clear();
    this.client.close();
    if (this.ownsConnection) await this.client.nc.drain().catch(() => {});
  }

  private render(resolved: ResolvedToolContext): ProviderToolsByFormat[F] {
    return providerToolsOf(resolved.matrixTools, this.format, this.request.strict === true);
  }
}
