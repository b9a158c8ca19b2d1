/**
 * The web console's HTTP server: Node's own `http`, pages rendered on the server, one small
 * script. It reads the bus through `BusClient` (the browser never touches NATS), binds to
 * 127.0.0.1 unless told otherwise, and is read-only unless started with writes on — then every
 * write (POST) needs the token it printed at start, compared in constant time.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient } from '../bus/client.js';
import { loopbackHosts } from '../loopback.js';
import { CLIENT_SCRIPT, STYLESHEET } from './assets.js';
import { ContextIndex } from './contexts-index.js';
import { html, notice } from './html.js';
import { renderDocument, renderFragment } from './layout.js';
import { LiveFeed, type LiveFeedOptions } from './live.js';
import { answerApproval, approvalsPage, keepApproverGrant } from './pages/approvals.js';
import { callsPage, cancelTask } from './pages/calls.js';
import { errorNotice } from './pages/common.js';
import { contextPage, contextsPage, registerContext, unregisterContext } from './pages/contexts.js';
import { acceptChange, mcpServersPage } from './pages/mcp-servers.js';
import { mountsPage } from './pages/mounts.js';
import { resolvePage } from './pages/resolve.js';
import { tryPage } from './pages/try.js';
import { sameSecret } from './secret.js';
import { ConsoleSignIn, cookiesOf, type Person, type SignInOptions, SignInRefused } from './sign-in.js';
import type { ConsoleDeps, ConsoleRequest, Page, Redirect } from './types.js';

/** How to run the console. */
export interface ConsoleOptions {
  /** Address to bind; default 127.0.0.1 (this machine only). */
  host?: string;
  /** Port; default 8080, 0 for any free one. */
  port?: number;
  /** Allow writes (try a tool, register, unregister), each behind the token. Default false. */
  allowWrites?: boolean;
  /** The write token; default 32 random bytes. */
  token?: string;
  /** Pacing of the live feed (tests shorten it). */
  live?: LiveFeedOptions;
  /** The approver grant (its text) to list and answer approvals with; one may be pasted on the page instead. */
  approverGrant?: string;
  /**
   * Sign people in through the organisation's IdP (authorization code with PKCE): what a person
   * signed in approves, rejects or cancels is sent with their access token. The redirect URI
   * defaults to this console's `/auth/callback`.
   */
  signIn?: Omit<SignInOptions, 'redirectUri'> & { redirectUri?: string };
}

/** A running console. */
export interface RunningConsole {
  /** Where it listens, e.g. `http://127.0.0.1:8080/`. */
  url: string;
  /** The write token, when writes are allowed. */
  token: string | undefined;
  /** Contexts the console's index holds. */
  index: ContextIndex;
  /** Where the IdP sends people back after sign-in, when sign-in is on. */
  redirectUri?: string;
  /** Why the IdP could not be reached at start (sign-in tries again on its first use). */
  signInProblem?: string;
  close(): Promise<void>;
}

/** Largest form accepted, in bytes (a context spec fits well within). */
const MAX_FORM_BYTES = 1024 * 1024;

const SECURITY_HEADERS = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
};

/** Starts the console on `nc`; resolves once it listens and its context index is loaded (or failed to). */
export async function startConsole(nc: NatsConnection, options: ConsoleOptions = {}): Promise<RunningConsole> {
  const client = new BusClient(nc, { timeoutMs: 10_000 });
  const index = new ContextIndex(client);
  const feed = new LiveFeed(nc, index, options.live);
  const writes = options.allowWrites === true;
  const token = writes ? (options.token ?? randomBytes(32).toString('base64url')) : undefined;
  const deps: ConsoleDeps = { nc, client, index, feed, writes, approver: { grant: options.approverGrant } };
  await feed.start();
  const host = options.host ?? '127.0.0.1';
  let hosts: ReadonlySet<string> | undefined;
  const server = createServer((req, res) => {
    handle(req, res, deps, token, hosts).catch((err) => fail(res, err));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 8080, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  hosts = loopbackHosts(host, port);
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}/`;
  let signInProblem: string | undefined;
  if (options.signIn !== undefined) {
    const redirectUri = options.signIn.redirectUri ?? `${url}auth/callback`;
    try {
      deps.signIn = new ConsoleSignIn({ ...options.signIn, redirectUri });
    } catch (err) {
      await closeServer(server, feed, client);
      throw err;
    }
    signInProblem = await deps.signIn.start().then(
      () => undefined,
      (err: Error) => `the identity provider ${options.signIn?.issuer} cannot be reached yet: ${err.message}`,
    );
  }
  return {
    url,
    token,
    index,
    ...(deps.signIn === undefined ? {} : { redirectUri: options.signIn?.redirectUri ?? `${url}auth/callback` }),
    ...(signInProblem === undefined ? {} : { signInProblem }),
    close: () => closeServer(server, feed, client, deps.signIn),
  };
}

async function closeServer(server: Server, feed: LiveFeed, client: BusClient, signIn?: ConsoleSignIn): Promise<void> {
  signIn?.stop();
  feed.stop();
  client.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  deps: ConsoleDeps,
  token: string | undefined,
  hosts: ReadonlySet<string> | undefined,
): Promise<void> {
  if (hosts !== undefined && !hosts.has(req.headers.host ?? ''))
    return plain(res, 421, 'wrong Host for this console\n');
  const url = new URL(req.url ?? '/', 'http://console.invalid');
  const method = req.method ?? 'GET';
  // Taken before the page reads the bus: an event during the reading makes the page catch up.
  const seq = deps.feed.seq;
  if (method === 'GET' && url.pathname === '/console.css') return asset(res, 'text/css', STYLESHEET);
  if (method === 'GET' && url.pathname === '/console.js') return asset(res, 'text/javascript', CLIENT_SCRIPT);
  if (method === 'GET' && url.pathname === '/favicon.ico') return plain(res, 204, '');
  if (method === 'GET' && url.pathname === '/events') {
    if (!deps.feed.attach(res)) plain(res, 503, 'too many live pages open\n');
    return;
  }
  if (method === 'GET' && url.pathname === '/') return redirect(res, '/contexts');
  if (method !== 'GET' && method !== 'POST') return plain(res, 405, 'GET or POST\n');
  const cookies = cookiesOf(req.headers.cookie);
  const signIn = deps.signIn;
  if (signIn !== undefined && method === 'GET' && (url.pathname === '/signin' || url.pathname === signIn.callbackPath))
    return signInStep(req, res, deps, signIn, url, cookies);
  const person = signIn?.personIn(cookies);
  let form = new URLSearchParams();
  if (method === 'POST') {
    const body = await readForm(req);
    if (body === undefined) return plain(res, 413, `a form is at most ${MAX_FORM_BYTES} bytes\n`);
    form = body;
    const refusal = writeRefusal(deps, token, req, form, url.pathname, person);
    if (refusal !== undefined)
      return page(
        res,
        req,
        deps,
        {
          title: 'Not allowed',
          section: '',
          live: notice('error', 'Not allowed', refusal),
          status: 403,
        },
        deps.feed.seq,
        person,
      );
    if (url.pathname === '/signout' && signIn !== undefined) {
      res.setHeader('Set-Cookie', signIn.signOut(cookies));
      return redirect(res, '/contexts');
    }
  }
  // A POST got here only with the token or a person's session (writeRefusal); a GET shows the
  // token in a header, or comes from a person signed in.
  const withToken =
    method === 'POST' || person !== undefined || (token !== undefined && sameSecret(tokenHeader(req), token));
  const result = await route({ method, url, form, deps, withToken, ...(person === undefined ? {} : { person }) });
  if (result === undefined)
    return page(
      res,
      req,
      deps,
      {
        title: 'Not found',
        section: '',
        live: notice('error', 'No such page', html`<a href="/contexts">Contexts</a>`),
        status: 404,
      },
      seq,
      person,
    );
  if ('redirect' in result) return redirect(res, result.redirect);
  page(res, req, deps, result, seq, person);
}

/**
 * `GET /signin` (off to the IdP, bound to this browser) and the redirect URI's path (back from
 * it: the session's cookie, then the page the person came from). A refused sign-in says why and
 * starts no session.
 */
async function signInStep(
  req: IncomingMessage,
  res: ServerResponse,
  deps: ConsoleDeps,
  signIn: ConsoleSignIn,
  url: URL,
  cookies: ReadonlyMap<string, string>,
): Promise<void> {
  try {
    if (url.pathname === '/signin') {
      const begun = await signIn.begin(url.searchParams.get('return') ?? '/approvals');
      res.setHeader('Set-Cookie', begun.cookie);
      return redirect(res, begun.location);
    }
    const done = await signIn.finish(url.searchParams, cookies);
    res.setHeader('Set-Cookie', done.cookies);
    return redirect(res, done.returnTo);
  } catch (err) {
    // An answer refused ends the sign-in it answered: the browser forgets it (used once).
    if (url.pathname !== '/signin') res.setHeader('Set-Cookie', signIn.endSignIn());
    const refused = err instanceof SignInRefused;
    if (!refused) process.stderr.write(`console: sign-in: ${(err as Error)?.message ?? String(err)}\n`);
    return page(res, req, deps, {
      title: 'Sign-in refused',
      section: '',
      live: notice(
        'error',
        refused ? 'You are not signed in' : 'The identity provider could not be reached',
        html`${refused ? (err as Error).message : ''} <a href="/signin">Sign in again</a>`,
      ),
      status: refused ? 400 : 502,
      address: '/contexts',
    });
  }
}

function route(request: ConsoleRequest): Promise<Page | Redirect> | undefined {
  const { method, url } = request;
  const path = url.pathname;
  if (path === '/contexts') return method === 'POST' ? registerContext(request) : contextsPage(request);
  const one = /^\/contexts\/([^/]+)(\/unregister)?$/.exec(path);
  if (one) {
    let key: string;
    try {
      key = decodeURIComponent(one[1] as string);
    } catch {
      return undefined;
    }
    if (one[2]) return method === 'POST' ? unregisterContext(request, key) : undefined;
    return method === 'GET' ? contextPage(request, key) : undefined;
  }
  if (method === 'GET' && path === '/resolve') return resolvePage(request);
  if (method === 'GET' && path === '/calls') return callsPage(request);
  if (method === 'GET' && path === '/mounts') return mountsPage(request);
  if (method === 'GET' && path === '/mcp') return mcpServersPage(request);
  if (method === 'POST' && path === '/mcp/accept') return acceptChange(request);
  if (path === '/try') return tryPage(request);
  if (path === '/approvals' || (method === 'GET' && path.startsWith('/approvals/'))) return approvalsPage(request);
  if (method === 'POST' && path === '/approvals/answer') return answerApproval(request);
  if (method === 'POST' && path === '/approvals/grant') return keepApproverGrant(request);
  if (method === 'POST' && path === '/tasks/cancel') return cancelTask(request);
  return undefined;
}

/** The writes a person signed in may make: each is sent with their own grant, and the service decides. */
const PERSON_WRITES: ReadonlySet<string> = new Set(['/approvals/answer', '/tasks/cancel', '/signout']);

/** Why a write is refused, or undefined when it may go ahead. */
function writeRefusal(
  deps: ConsoleDeps,
  token: string | undefined,
  req: IncomingMessage,
  form: URLSearchParams,
  path: string,
  person: Person | undefined,
): string | undefined {
  // The cookie goes with any form that reaches this console; the session's own secret only
  // with a form of its pages (SameSite=Lax stops most others; this stops the rest).
  const personal = person !== undefined && PERSON_WRITES.has(path);
  if (personal && sameSecret(form.get('csrf') ?? '', person.csrf)) return undefined;
  const given = tokenHeader(req) || (form.get('token') ?? '');
  if (deps.writes && token !== undefined && sameSecret(given, token)) return undefined;
  if (personal)
    return 'This form did not come from a page of this console for your session: reload the page and try again.';
  if (!deps.writes || token === undefined) {
    if (deps.signIn !== undefined)
      return person === undefined
        ? 'Sign in first (Sign in, at the top right): what you approve, reject or cancel is sent as you.'
        : 'Signed in, you may approve, reject and cancel your tasks; this write needs the console started with --allow-writes and its token.';
    return 'This console is read-only: start it with --allow-writes to try tools and register contexts.';
  }
  return 'A write needs the token the console printed at start: paste it into the token field at the top right.';
}

function tokenHeader(req: IncomingMessage): string {
  const header = req.headers['x-console-token'];
  return typeof header === 'string' ? header : '';
}

async function readForm(req: IncomingMessage): Promise<URLSearchParams | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  // Past the limit the rest is read and dropped, so the client hears the 413 instead of a reset.
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= MAX_FORM_BYTES) chunks.push(chunk);
  }
  return size > MAX_FORM_BYTES ? undefined : new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

function page(
  res: ServerResponse,
  req: IncomingMessage,
  deps: ConsoleDeps,
  p: Page,
  seq = deps.feed.seq,
  person?: Person,
): void {
  const fragment = req.headers['x-console-fragment'] === '1';
  const viewer = deps.signIn === undefined ? undefined : person === undefined ? {} : { person };
  const body = fragment ? renderFragment(p) : renderDocument(p, deps.writes, seq, viewer);
  res.writeHead(p.status ?? 200, { ...SECURITY_HEADERS, 'Content-Type': 'text/html; charset=utf-8' });
  res.end(body);
}

function asset(res: ServerResponse, type: string, text: string): void {
  res.writeHead(200, { ...SECURITY_HEADERS, 'Content-Type': `${type}; charset=utf-8`, 'Cache-Control': 'max-age=300' });
  res.end(text);
}

function redirect(res: ServerResponse, to: string): void {
  res.writeHead(303, { ...SECURITY_HEADERS, Location: to });
  res.end();
}

function plain(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'Content-Type': 'text/plain; charset=utf-8' });
  res.end(text);
}

/** Last resort: an error no page caught. The message stays in the log, never in the page. */
function fail(res: ServerResponse, err: unknown): void {
  process.stderr.write(`console: ${(err as Error)?.stack ?? String(err)}\n`);
  if (res.headersSent) {
    res.end();
    return;
  }
  const body = renderDocument(
    { title: 'Error', section: '', live: errorNotice(err, 'The page failed'), status: 500 },
    false,
  );
  res.writeHead(500, { ...SECURITY_HEADERS, 'Content-Type': 'text/html; charset=utf-8' });
  res.end(body);
}
