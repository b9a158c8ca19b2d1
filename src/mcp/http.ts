/**
 * `mcp --http`: the MCP bridge over Streamable HTTP, for remote MCP clients, both revisions on
 * one endpoint (docs/mcp-bridge-2026.md). Each request passes the same pipeline: `Host`/`Origin`
 * (no DNS rebinding), the path, the body's limits, then the SDK's era classification.
 * - 2025-11-25 (`initialize`, `Mcp-Session-Id`, `GET`, `DELETE`): one MCP session per client
 *   (the SDK 1.32 transport), each its own `McpBridge` (src/mcp/bridge.ts): its tools,
 *   instructions and `list_changed` as over stdio. With trusted issuers (`MATRIX_TRUSTED_ISSUERS` /
 *   `--trust`, the service's) every session is opened with its own grant, `Authorization: Bearer
 *   <grant>`, checked before anything is resolved, and every request of the session must carry
 *   that same grant.
 * - 2026-07-28 (the `_meta` envelope): no session; `callerOf` identifies each request on its own
 *   (the place another way of identifying callers would be checked) and the SDK 2.x handler
 *   (src/mcp/modern.ts) serves it, so any bridge process serves any request.
 * Without issuers (development) every client is `--profile`'s, as over stdio. It listens on the
 * loopback by default.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { toNodeHandler, toWebRequest } from '@modelcontextprotocol/node';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isLegacyRequest } from '@modelcontextprotocol/server';
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient } from '../bus/client.js';
import type { CallContext } from '../bus/context.js';
import { MatrixError } from '../bus/errors.js';
import { GrantError } from '../identity/errors.js';
import { GrantedSession } from '../identity/granted.js';
import { GrantVerifier } from '../identity/verify.js';
import type { DeferOptions } from '../registry/search/search-tool.js';
import type { ResolveRequest } from '../registry/types.js';
import { type McpBridge, openBridge } from './bridge.js';
import { BODY_TIMEOUT_MS, notInitialize, readPostBody } from './http-body.js';
import { allowedHosts, LOOPBACK, originRefusal, WILDCARD } from './http-hosts.js';
import { DEFAULT_IDLE_MS, DEFAULT_MAX_SESSIONS, DEFAULT_MAX_SESSIONS_PER_GRANT } from './http-limits.js';
import type { JsonRpcErrorResponse } from './input.js';
import { callerAuthInfo, type ModernCaller, modernHandler, resolveTools } from './modern.js';
import { ToolChangeFeed } from './modern-changes.js';
import type { OAuthResource } from './oauth-resource.js';

/** Where and for whom the HTTP bridge serves. */
export interface McpHttpOptions {
  /** Address to listen on; default `127.0.0.1` (loopback only). */
  host?: string;
  /** Port; default 3333, `0` for any free one. */
  port?: number;
  /** Public nkeys of the trusted grant issuers: when given, each session needs its own bearer grant. */
  issuers?: readonly string[];
  /** Without issuers: the session every client gets (`--profile` and the session flags). */
  session?: ResolveRequest;
  /** Without issuers: the context of every request (a `--grant` given to the bridge). */
  ctx?: CallContext;
  /**
   * Further `Host` values to accept (`name:port`, or `name` for this bridge's port), for a bridge
   * behind a proxy or on every address; required when `host` is a wildcard (`0.0.0.0`, `::`),
   * whose clients reach it by names it cannot know (`--allowed-host`, `MATRIX_MCP_ALLOWED_HOSTS`).
   */
  allowedHosts?: readonly string[];
  /** Most MCP sessions open at once; a client past it gets `503`. Default 256. */
  maxSessions?: number;
  /**
   * Most MCP sessions open at once under one grant (one principal and grant session; a renewed
   * grant counts as the same); a client past it gets `429`. Default 16. Without issuers only
   * `maxSessions` bounds them.
   */
  maxSessionsPerGrant?: number;
  /** A session with no request open and none for this long is closed, in ms. Default 1800000 (30 min). */
  idleMs?: number;
  /** An OAuth 2.1 protected resource (`--oauth-issuer`): each session is an access token's (src/mcp/oauth-resource.ts). */
  oauth?: OAuthResource;
  /**
   * When a session's client lists `search_tools` and the kept tools instead of every tool: past
   * `threshold` tools (default 30), in both revisions (PROTOCOL 13).
   */
  search?: DeferOptions;
}

/** A running HTTP bridge. */
export interface McpHttpBridge {
  /** Its endpoint, e.g. `http://127.0.0.1:3333/mcp`. */
  url: string;
  /** MCP sessions open now. */
  sessions(): number;
  /** Closes every session and stops listening. */
  close(): Promise<void>;
}

/** The path the bridge answers on. */
export const MCP_PATH = '/mcp';
export const DEFAULT_MCP_HTTP_PORT = 3333;

/**
 * One client's MCP session: its transport, its bridge, the grant it was opened with, and when it
 * was last asked anything.
 */
interface Session {
  transport: StreamableHTTPServerTransport;
  bridge: McpBridge;
  grant: string | undefined;
  lastSeen: number;
  /** Requests of it still open (a GET stream that waits for list_changed among them): it is not idle while any is. */
  open: number;
  /** The grant read and verified; undefined without issuers. */
  granted: GrantedSession | undefined;
  /** When its grant expires, Unix ms (the session is closed then); undefined without issuers. */
  expiresAtMs: number | undefined;
  /** The timer that closes it at `expiresAtMs`. */
  expiry: NodeJS.Timeout | undefined;
}

/** A session lives no longer than its grant: (re)sets the timer that closes it when the grant expires. */
function armExpiry(session: Session): void {
  clearTimeout(session.expiry);
  if (session.expiresAtMs === undefined) return;
  const delay = Math.min(Math.max(session.expiresAtMs - Date.now(), 0), LONGEST_TIMER_MS);
  session.expiry = setTimeout(() => void session.transport.close(), delay).unref();
}

/** Longest delay `setTimeout` takes, in ms (about 24.8 days). */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

/** Starts listening; resolves once it does. */
export async function startMcpHttp(nc: NatsConnection, options: McpHttpOptions = {}): Promise<McpHttpBridge> {
  const host = options.host ?? '127.0.0.1';
  if (WILDCARD.has(host) && (options.allowedHosts ?? []).length === 0)
    throw new TypeError(
      `listening on every address (--host ${host}) needs --allowed-host: the names clients reach this bridge by (Host is checked, no DNS rebinding)`,
    );
  const verifier =
    options.oauth?.verifier ??
    (options.issuers !== undefined && options.issuers.length > 0 ? new GrantVerifier(options.issuers) : undefined);
  if (verifier === undefined && options.session === undefined)
    throw new TypeError('an HTTP bridge needs trusted issuers (each client brings a grant) or a --profile to serve');
  const sessions = new Map<string, Session>();
  /**
   * `bearer` as a renewal of `session`'s grant: verified, and naming the same principal, grant
   * session and authority; a string says why it does not verify (401), undefined that it is
   * another grant (403).
   */
  const renewalOf = (session: Session, bearer: string | undefined): GrantedSession | string | undefined => {
    const before = session.granted;
    if (verifier === undefined || before === undefined || bearer === undefined) return undefined;
    let next: GrantedSession;
    try {
      next = new GrantedSession(bearer, {}, verifier);
    } catch (err) {
      if (err instanceof GrantError) return err.message;
      throw err;
    }
    const same =
      next.principal === before.principal &&
      next.session === before.session &&
      JSON.stringify(next.request) === JSON.stringify(before.request);
    return same ? next : undefined;
  };
  const maxSessions = options.maxSessions ?? DEFAULT_MAX_SESSIONS;
  const maxPerGrant = options.maxSessionsPerGrant ?? DEFAULT_MAX_SESSIONS_PER_GRANT;
  const idleMs = options.idleMs ?? DEFAULT_IDLE_MS;
  // Sessions open or being opened, in all and per grant: admitted before anything is awaited.
  let admitted = 0;
  const perGrant = new Map<string, number>();
  const admit = (key: string | undefined): (() => void) => {
    admitted++;
    if (key !== undefined) perGrant.set(key, (perGrant.get(key) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      admitted--;
      if (key === undefined) return;
      const left = (perGrant.get(key) ?? 1) - 1;
      if (left === 0) perGrant.delete(key);
      else perGrant.set(key, left);
    };
  };
  // Sessions whose client went away without DELETE would stay forever: idle ones are closed.
  const sweeper = setInterval(
    () => {
      const now = Date.now();
      for (const s of sessions.values()) if (s.open === 0 && now - s.lastSeen > idleMs) void s.transport.close();
    },
    Math.min(idleMs, 60_000),
  ).unref();
  // 2026-07-28 requests: each served on its own by the SDK's handler, nothing kept between them.
  const modernClient = new BusClient(nc, { timeoutMs: 10_000 });
  // list_changed for 2026 subscribers: each request is served as its caller, so a stream is filed under it.
  const changes = new ToolChangeFeed(nc, (caller) => resolveTools(modernClient, caller), log);
  const modern = modernHandler(modernClient, options.search, changes);
  const serveModern = toNodeHandler(modern);
  const modernLeg = (req: IncomingMessage, res: ServerResponse, message: unknown, caller: ModernCaller) => {
    (req as IncomingMessage & { auth?: unknown }).auth = callerAuthInfo(caller);
    return changes.serving(caller, () => serveModern(req, res, message));
  };
  let allowed = new Set<string>();
  const server: Server = createServer(
    { headersTimeout: BODY_TIMEOUT_MS, connectionsCheckingInterval: 1_000 },
    (req, res) => {
      void handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) reply(res, 500, `the bridge failed: ${(err as Error).message}`);
      });
    },
  );

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const refusal = originRefusal(req, allowed);
    if (refusal !== undefined) return reply(res, 403, refusal);
    if (options.oauth !== undefined && (await options.oauth.intercept(req, res, MCP_PATH))) return;
    if (new URL(req.url ?? '/', 'http://bridge').pathname !== MCP_PATH)
      return reply(res, 404, `the MCP endpoint is ${MCP_PATH}`);
    const bearer = bearerOf(req);
    // Without issuers no bearer is checked: taking one would let a client believe it is itself.
    if (verifier === undefined && bearer !== undefined)
      return reply(
        res,
        400,
        'this bridge checks no bearer grants (it was started without --trust): every client is served as the bridge itself; send no Authorization',
      );
    const id = req.headers['mcp-session-id'];
    // 2025-11-25 session requests (and GET/DELETE, which only sessions have) go on as before.
    if (typeof id === 'string' || req.method !== 'POST') return serveSession(req, res, bearer, id);
    const body = await readPostBody(req);
    if (!body.ok) {
      if (body.error !== undefined) answer(res, body.status, body.error);
      return;
    }
    if (await isLegacyRequest(await toWebRequest(req, body.message), body.message))
      return openLegacy(req, res, bearer, body.message);
    const caller = callerOf(bearer);
    if (typeof caller === 'string') return unauthorized(res, caller);
    await modernLeg(req, res, body.message, caller);
  };

  /**
   * Who a 2026-07-28 request is served as: its bearer grant's session and context when the bridge
   * trusts issuers, else the bridge's own; a string says why its grant does not verify (401).
   * Each request is checked on its own, so any bridge process can serve it. This is where another
   * way of identifying a caller (an OAuth access token) would be checked.
   */
  const callerOf = (bearer: string | undefined): ModernCaller | string => {
    if (verifier === undefined) return { session: options.session ?? { profile: '' }, ctx: { ...options.ctx } };
    if (bearer === undefined) return 'a grant is required: send Authorization: Bearer <grant>';
    try {
      const granted = new GrantedSession(bearer, {}, verifier);
      return { session: granted.request, ctx: granted.context() };
    } catch (err) {
      if (err instanceof GrantError) return err.message;
      throw err;
    }
  };

  /** A 2025-11-25 request of an open session, or one that needs a session (GET, DELETE). */
  const serveSession = async (
    req: IncomingMessage,
    res: ServerResponse,
    bearer: string | undefined,
    id: string | string[] | undefined,
  ) => {
    if (typeof id === 'string') {
      const session = sessions.get(id);
      if (session === undefined) return reply(res, 404, 'no such MCP session: initialize a new one');
      if (session.grant !== bearer) {
        const renewal = renewalOf(session, bearer);
        if (typeof renewal === 'string') return unauthorized(res, renewal);
        if (renewal === undefined)
          return reply(res, 403, 'this MCP session was opened with another grant: present the same bearer grant');
        // The same principal, grant session and authority, signed again: the session goes on under it.
        session.grant = renewal.grant;
        session.expiresAtMs = renewal.expiresAtMs;
        session.bridge.renewGrant(renewal.grant);
        armExpiry(session);
      }
      // The service refused the session's grant (revoked, say): its client must bring another.
      const refused = session.bridge.grantRefusal;
      if (refused !== undefined) {
        void session.transport.close();
        return unauthorized(res, `the service refused this MCP session's grant: ${refused.code}: ${refused.message}`);
      }
      if (session.expiresAtMs !== undefined && Date.now() >= session.expiresAtMs) {
        void session.transport.close();
        return unauthorized(res, 'the grant of this MCP session has expired: initialize a new one with a fresh grant');
      }
      session.lastSeen = Date.now();
      session.open++;
      res.once('close', () => {
        session.open--;
        session.lastSeen = Date.now();
      });
      if (req.method !== 'POST') return session.transport.handleRequest(req, res);
      const body = await readPostBody(req);
      if (body.ok) return session.transport.handleRequest(req, res, body.message);
      if (body.error !== undefined) answer(res, body.status, body.error);
      return;
    }
    return reply(res, 400, 'a new MCP session starts with a POST of initialize');
  };

  /** A POST without a session and without 2026-07-28's envelope: a 2025-11-25 client opening one. */
  const openLegacy = async (
    req: IncomingMessage,
    res: ServerResponse,
    bearer: string | undefined,
    message: unknown,
  ) => {
    if (admitted >= maxSessions)
      return reply(res, 503, `${admitted} MCP sessions are open, the most this bridge serves: close one first`);
    let granted: GrantedSession | undefined;
    if (verifier !== undefined) {
      if (bearer === undefined)
        return unauthorized(res, 'a session grant is required: send Authorization: Bearer <grant>');
      try {
        granted = new GrantedSession(bearer, {}, verifier);
      } catch (err) {
        if (err instanceof GrantError) return unauthorized(res, err.message);
        throw err;
      }
    }
    const key = granted === undefined ? undefined : `${granted.principal}\u0000${granted.session}`;
    if (key !== undefined && (perGrant.get(key) ?? 0) >= maxPerGrant)
      return reply(
        res,
        429,
        `${maxPerGrant} MCP sessions are open under this grant, the most one grant may hold: close one first`,
      );
    const release = admit(key);
    try {
      await openSession(req, res, message, granted, bearer, release);
    } catch (err) {
      release();
      throw err;
    }
  };

  /**
   * A new session: its body read and checked to be `initialize` before its tools are resolved or
   * anything subscribed.
   */
  const openSession = async (
    req: IncomingMessage,
    res: ServerResponse,
    message: unknown,
    granted: GrantedSession | undefined,
    bearer: string | undefined,
    release: () => void,
  ) => {
    const refused = notInitialize(message);
    if (refused !== undefined && !refused.ok) {
      release();
      if (refused.error !== undefined) answer(res, refused.status, refused.error);
      return;
    }
    let bridge: McpBridge;
    try {
      bridge = granted
        ? await openBridge(nc, granted.request, granted.context(), options.search)
        : await openBridge(nc, options.session ?? { profile: '' }, options.ctx ?? {}, options.search);
    } catch (err) {
      release();
      if (err instanceof MatrixError) {
        const why = `${err.code}: ${err.message}`;
        // A grant the service refused (revoked, wrong holder) is the client's to replace: 401.
        if (err.code === 'forbidden' && err.details?.grant !== undefined) return unauthorized(res, why);
        return reply(res, openFailureStatus(err), why);
      }
      throw err;
    }
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sessionId) => {
        const session: Session = {
          transport,
          bridge,
          grant: granted === undefined ? undefined : bearer,
          granted,
          lastSeen: Date.now(),
          open: 0,
          expiresAtMs: granted?.expiresAtMs,
          expiry: undefined,
        };
        sessions.set(sessionId, session);
        armExpiry(session);
      },
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) {
        clearTimeout(sessions.get(transport.sessionId)?.expiry);
        sessions.delete(transport.sessionId);
      }
      release();
      void bridge.close();
    };
    await bridge.connect(transport);
    await transport.handleRequest(req, res, message);
    // A first request that did not initialize a session leaves nothing behind.
    if (transport.sessionId === undefined) {
      release();
      await bridge.close();
    }
  };

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? DEFAULT_MCP_HTTP_PORT, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  allowed = allowedHosts(host, port, options.allowedHosts ?? []);
  const shown = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shown}:${port}${MCP_PATH}`,
    sessions: () => sessions.size,
    close: async () => {
      clearInterval(sweeper);
      const open = [...sessions.values()];
      sessions.clear();
      await Promise.allSettled(open.map((s) => s.transport.close()));
      await Promise.allSettled(open.map((s) => s.bridge.close()));
      changes.close();
      await modern.close();
      modernClient.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * The status of a session the bus would not open: the client's fault (a grant naming a context
 * that does not exist, `400`; one it may not resolve, `403`) or the bus's (`502`).
 */
function openFailureStatus(err: MatrixError): number {
  if (err.code === 'not_found') return 400;
  return err.status < 500 ? err.status : 502;
}

function log(line: string): void {
  process.stderr.write(`mcp bridge: ${line}\n`);
}

function bearerOf(req: IncomingMessage): string | undefined {
  const header = req.headers.authorization;
  const match = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

function unauthorized(res: ServerResponse, message: string): void {
  res.setHeader('WWW-Authenticate', `Bearer realm="matrix-tools", error="invalid_token"`);
  reply(res, 401, message);
}

/** A JSON-RPC error answer with an HTTP status, as the SDK's transport answers its own refusals. */
function reply(res: ServerResponse, status: number, message: string): void {
  answer(res, status, { jsonrpc: '2.0', id: null, error: { code: -32000, message } });
}

function answer(res: ServerResponse, status: number, error: JsonRpcErrorResponse): void {
  // Refused before its body was read: the connection ends with the answer, not when the body does.
  const unread = !res.req.complete;
  if (unread) res.setHeader('Connection', 'close');
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(error), () => {
    if (unread) res.req.socket.destroy();
  });
}

/** `mcp --http`: serves until SIGINT or SIGTERM. */
export async function serveMcpHttp(nc: NatsConnection, options: McpHttpOptions): Promise<void> {
  const bridge = await startMcpHttp(nc, options);
  const mode = options.issuers?.length
    ? `a grant per session from ${options.issuers.length} issuer(s)`
    : `profile ${options.session?.profile}`;
  process.stderr.write(`mcp bridge: ready on ${bridge.url} (${mode})\n`);
  if (!options.issuers?.length) {
    const who = options.ctx?.principal ?? 'the bridge';
    const where = LOOPBACK.has(options.host ?? '127.0.0.1') ? 'every local process' : 'anyone who reaches it';
    process.stderr.write(
      `mcp bridge: warning: no --trust, so no client is checked: ${where} acts as ${who}${options.ctx?.grant === undefined ? '' : ' with its --grant'}\n`,
    );
  }
  const signal = await new Promise<string>((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
  process.stderr.write(`mcp bridge: ${signal}; closing ${bridge.sessions()} session(s)\n`);
  await bridge.close();
}
