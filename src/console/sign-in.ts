/**
 * The console's sign-in through the organisation's identity provider (PROTOCOL 14): OpenID
 * Connect's authorization code flow with PKCE (S256) as a public client (no secret), `state`
 * bound to the browser that began it and used once, `nonce` checked in the ID token, the
 * authorization response's `iss` (RFC 9207) checked where the IdP sends it. The access token it
 * gives, for the service's resource (RFC 8707, the `--oidc-audience` the service trusts), is the
 * person's grant: what they approve, reject or cancel is sent with it as `Matrix-Grant`, so the
 * service records the IdP's subject as who did it. Sessions live in the console's memory, named
 * by an HttpOnly, SameSite=Lax cookie (Secure when the console is reached over https). A sign-in
 * begun and not yet answered lives in its browser alone: its secrets are sealed (AES-256-GCM, a
 * key of this process) into the cookie that binds it there, so no number of sign-ins begun
 * elsewhere can push a person's out; the server remembers only the states already answered.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { OidcIssuer, type OidcIssuerOptions, TokenRefused } from '../identity/oidc/issuer.js';
import { sameSecret } from './secret.js';

/** How the console signs people in. */
export interface SignInOptions {
  /** The IdP's issuer identifier (its discovery document is under it). */
  issuer: string;
  /** The console's client id at the IdP (a public client: no secret). */
  clientId: string;
  /** Where the IdP sends the browser back: the console's `/auth/callback`, as registered at the IdP. */
  redirectUri: string;
  /** The resource the access token is asked for (RFC 8707): the service's `--oidc-audience`. */
  audience: string;
  /** Scopes asked, space-separated; `openid` is always among them. Default `openid`. */
  scope?: string;
  /** How the issuer's keys are kept (tests shorten it). */
  issuerOptions?: OidcIssuerOptions;
}

/** A person signed in: who the IdP says they are, and the grant they act with. */
export interface Person {
  /** The ID token's `sub`. */
  subject: string;
  /** What the page calls them: the ID token's `preferred_username`, `email`, `name`, else `sub`. */
  name: string;
  /** The access token, sent as `Matrix-Grant` with what they do. */
  grant: string;
  /** When the access token expires (Unix ms): the session ends then. */
  expiresAtMs: number;
  /** This session's secret that a write's form carries (`csrf`), beside the cookie. */
  csrf: string;
}

/** A sign-in that cannot complete, and why; shown to the person, never a secret in it. */
export class SignInRefused extends Error {
  override name = 'SignInRefused';
}

/** A sign-in begun and not yet come back: its secrets, sealed in the browser's binding cookie. */
interface Pending {
  state: string;
  nonce: string;
  verifier: string;
  returnTo: string;
  startedAtMs: number;
}

/** How long a sign-in may take at the IdP, in ms. */
const PENDING_MS = 10 * 60_000;
/**
 * Most answered sign-ins' states remembered (so an answer replayed with its binding cookie finds
 * none waiting); past it the oldest is forgotten, which lets no sign-in be pushed out.
 */
const MAX_ANSWERED = 10_000;
/** Most sessions at once (expired ones are dropped first; then the oldest). */
const MAX_SESSIONS = 10_000;

/** A relying party of one IdP, and the sessions of the people it signed in. */
export class ConsoleSignIn {
  private readonly idp: OidcIssuer;
  /** The key sign-ins' cookies are sealed with: one per process (a restart drops sign-ins begun). */
  private readonly sealKey = randomBytes(32);
  /** The states of the sign-ins answered, with when they began, in the order answered. */
  private readonly answered = new Map<string, number>();
  private readonly sessions = new Map<string, Person>();
  /** The path the IdP sends the browser back to. */
  readonly callbackPath: string;
  /** Whether the console is reached over https (its cookies are then Secure and `__Host-`). */
  readonly secure: boolean;
  private readonly sessionCookie: string;
  private readonly bindingCookie: string;

  constructor(private readonly options: SignInOptions) {
    for (const [flag, value] of [
      ['client id', options.clientId],
      ['redirect URI', options.redirectUri],
      ['audience', options.audience],
    ] as const)
      if (value.trim() === '') throw new Error(`console sign-in needs a ${flag}`);
    const redirect = new URL(options.redirectUri);
    this.idp = new OidcIssuer(options.issuer, options.issuerOptions);
    this.callbackPath = redirect.pathname;
    this.secure = redirect.protocol === 'https:';
    this.sessionCookie = this.secure ? '__Host-matrix-console' : 'matrix-console';
    this.bindingCookie = this.secure ? '__Host-matrix-console-signin' : 'matrix-console-signin';
  }

  /** The IdP's issuer identifier. */
  get issuer(): string {
    return this.idp.issuer;
  }

  /** Fetches the IdP's discovery document and keys; rejects when it cannot be reached. */
  async start(): Promise<void> {
    await this.idp.start();
  }

  stop(): void {
    this.idp.stop();
  }

  /**
   * Begins a sign-in: where to send the browser (the IdP's authorization endpoint) and the cookie
   * that binds this sign-in to that browser. `returnTo` is the console's page to come back to.
   */
  async begin(returnTo: string): Promise<{ location: string; cookie: string }> {
    const authorize = await this.endpoint('authorization_endpoint');
    const pending: Pending = {
      state: secret(),
      nonce: secret(),
      verifier: secret(),
      returnTo: localPath(returnTo),
      startedAtMs: Date.now(),
    };
    const url = new URL(authorize);
    url.searchParams.set('response_type', 'code');
    url.searchParams.set('client_id', this.options.clientId);
    url.searchParams.set('redirect_uri', this.options.redirectUri);
    url.searchParams.set('scope', scopeOf(this.options.scope));
    url.searchParams.set('state', pending.state);
    url.searchParams.set('nonce', pending.nonce);
    url.searchParams.set('code_challenge', createHash('sha256').update(pending.verifier).digest('base64url'));
    url.searchParams.set('code_challenge_method', 'S256');
    url.searchParams.set('resource', this.options.audience);
    return { location: url.href, cookie: this.cookie(this.bindingCookie, this.seal(pending), PENDING_MS / 1000) };
  }

  /**
   * Finishes a sign-in from the IdP's answer (the callback's query) in the browser that began it
   * (its cookies): the session's cookie, the cookie that forgets the binding, and the page to
   * return to. `SignInRefused` when the state is not this browser's, the IdP said no, the code is
   * refused (used before, or not this sign-in's verifier), or a token does not hold.
   */
  async finish(
    query: URLSearchParams,
    cookies: ReadonlyMap<string, string>,
  ): Promise<{ cookies: string[]; returnTo: string; person: Person }> {
    const sealed = cookies.get(this.bindingCookie);
    const pending = sealed === undefined || sealed === '' ? undefined : this.open(sealed);
    // Used once, whatever follows: a second answer to the same sign-in is refused (the browser
    // is told to forget the cookie, `endSignIn`; the state is remembered here besides).
    const answeredBefore = pending !== undefined && this.answer(pending);
    if (pending === undefined || answeredBefore || Date.now() - pending.startedAtMs > PENDING_MS)
      throw new SignInRefused('no sign-in of this browser is waiting for an answer (or it took over 10 minutes)');
    if (!sameSecret(query.get('state') ?? '', pending.state))
      throw new SignInRefused('the answer is not for the sign-in this browser began (state does not match)');
    const metadata = await this.idp.metadata();
    const iss = query.get('iss');
    if (iss !== null ? iss !== this.idp.issuer : metadata.authorization_response_iss_parameter_supported === true)
      throw new SignInRefused(`the answer does not come from ${this.idp.issuer} (iss)`);
    const error = query.get('error');
    if (error !== null)
      throw new SignInRefused(`the identity provider said ${error}: ${query.get('error_description') ?? ''}`.trim());
    const code = query.get('code');
    if (code === null || code === '') throw new SignInRefused('the answer carries no code');
    const tokens = await this.exchange(code, pending.verifier);
    const person = await this.personOf(tokens, pending.nonce);
    const session = secret();
    this.keep(session, person);
    return {
      cookies: [
        this.cookie(this.sessionCookie, session, Math.max(0, Math.floor((person.expiresAtMs - Date.now()) / 1000))),
        this.endSignIn(),
      ],
      returnTo: pending.returnTo,
      person,
    };
  }

  /** The cookie that makes the browser forget the sign-in it began (sent with every answer to it). */
  endSignIn(): string {
    return this.cookie(this.bindingCookie, '', 0);
  }

  /** The person whose session the request's cookies name; undefined for none, or one expired. */
  personIn(cookies: ReadonlyMap<string, string>): Person | undefined {
    const session = cookies.get(this.sessionCookie);
    if (session === undefined) return undefined;
    const person = this.sessions.get(session);
    if (person !== undefined && person.expiresAtMs <= Date.now()) {
      this.sessions.delete(session);
      return undefined;
    }
    return person;
  }

  /** Ends the request's session; the cookie that clears it from the browser. */
  signOut(cookies: ReadonlyMap<string, string>): string {
    const session = cookies.get(this.sessionCookie);
    if (session !== undefined) this.sessions.delete(session);
    return this.cookie(this.sessionCookie, '', 0);
  }

  /** The code exchanged at the token endpoint, as a public client proving the verifier. */
  private async exchange(code: string, verifier: string): Promise<{ access_token: string; id_token: string }> {
    const body = new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      redirect_uri: this.options.redirectUri,
      client_id: this.options.clientId,
      code_verifier: verifier,
      resource: this.options.audience,
    });
    const response = await fetch(await this.endpoint('token_endpoint'), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body,
      redirect: 'error',
      signal: AbortSignal.timeout(10_000),
    });
    const reply = (await response.json().catch(() => ({}))) as Record<string, unknown>;
    if (!response.ok)
      throw new SignInRefused(
        `the identity provider refused the code: ${String(reply.error ?? response.status)} ${String(reply.error_description ?? '')}`.trim(),
      );
    if (typeof reply.id_token !== 'string') throw new SignInRefused('the identity provider gave no ID token');
    if (typeof reply.access_token !== 'string') throw new SignInRefused('the identity provider gave no access token');
    return { access_token: reply.access_token, id_token: reply.id_token };
  }

  /** Who the ID token says signed in (its nonce this sign-in's), acting with the access token. */
  private async personOf(tokens: { access_token: string; id_token: string }, nonce: string): Promise<Person> {
    let id: Record<string, unknown>;
    let access: Record<string, unknown>;
    try {
      id = await this.idp.verify(tokens.id_token, this.options.clientId);
    } catch (err) {
      throw new SignInRefused(`the ID token does not hold: ${(err as Error).message.replace('access token', 'token')}`);
    }
    if (typeof id.nonce !== 'string' || !sameSecret(id.nonce, nonce))
      throw new SignInRefused('the ID token is not for this sign-in (nonce does not match)');
    if (Array.isArray(id.aud) && id.aud.length > 1 && id.azp !== this.options.clientId)
      throw new SignInRefused('the ID token was issued to another client (azp)');
    try {
      access = await this.idp.verify(tokens.access_token, this.options.audience);
    } catch (err) {
      const why = err instanceof TokenRefused ? err.message : String(err);
      // An opaque token, or one for another resource, is no grant the service would take.
      throw new SignInRefused(`the access token is no grant for ${this.options.audience}: ${why}`);
    }
    const subject = String(id.sub);
    const shown = [id.preferred_username, id.email, id.name].find((v) => typeof v === 'string' && v !== '');
    return {
      subject,
      name: (shown as string | undefined) ?? subject,
      grant: tokens.access_token,
      expiresAtMs: (access.exp as number) * 1000,
      csrf: secret(),
    };
  }

  private keep(session: string, person: Person): void {
    if (this.sessions.size >= MAX_SESSIONS) {
      const now = Date.now();
      for (const [key, p] of this.sessions) if (p.expiresAtMs <= now) this.sessions.delete(key);
      if (this.sessions.size >= MAX_SESSIONS) this.sessions.delete(this.sessions.keys().next().value as string);
    }
    this.sessions.set(session, person);
  }

  /** A sign-in's secrets, sealed for its binding cookie: base64url of IV, tag and ciphertext. */
  private seal(pending: Pending): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.sealKey, iv);
    cipher.setAAD(Buffer.from(this.bindingCookie));
    const sealed = Buffer.concat([cipher.update(JSON.stringify(pending), 'utf8'), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64url');
  }

  /** The sign-in a binding cookie holds; undefined when it was not sealed by this process. */
  private open(value: string): Pending | undefined {
    try {
      const bytes = Buffer.from(value, 'base64url');
      if (bytes.length <= 28 || bytes.length > 4096) return undefined;
      const decipher = createDecipheriv('aes-256-gcm', this.sealKey, bytes.subarray(0, 12));
      decipher.setAAD(Buffer.from(this.bindingCookie));
      decipher.setAuthTag(bytes.subarray(12, 28));
      const text = Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]).toString('utf8');
      const p = JSON.parse(text) as Pending;
      for (const key of ['state', 'nonce', 'verifier', 'returnTo'] as const)
        if (typeof p[key] !== 'string') return undefined;
      return typeof p.startedAtMs === 'number' ? p : undefined;
    } catch {
      return undefined;
    }
  }

  /** Marks a sign-in answered; whether it was before. Forgets states past their 10 minutes. */
  private answer(pending: Pending): boolean {
    const now = Date.now();
    for (const [state, startedAtMs] of this.answered) {
      if (now - startedAtMs <= PENDING_MS && this.answered.size < MAX_ANSWERED) break;
      this.answered.delete(state);
    }
    if (this.answered.has(pending.state)) return true;
    this.answered.set(pending.state, pending.startedAtMs);
    return false;
  }

  private async endpoint(name: 'authorization_endpoint' | 'token_endpoint'): Promise<string> {
    const value = (await this.idp.metadata())[name];
    if (typeof value !== 'string') throw new SignInRefused(`the identity provider's discovery document has no ${name}`);
    return value;
  }

  private cookie(name: string, value: string, maxAgeSeconds: number): string {
    return `${name}=${value}; Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Lax${this.secure ? '; Secure' : ''}`;
  }
}

/** The request's cookies by name. */
export function cookiesOf(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of (header ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at > 0) cookies.set(part.slice(0, at).trim(), part.slice(at + 1).trim());
  }
  return cookies;
}

/** Where `localPath` resolves a page: any origin does; only whether it stays the same matters. */
const HOME = 'http://console.invalid';

/**
 * A page of this console to return to: a path of its own, never another site's address. The
 * value is resolved the way a browser would (WHATWG URL) against the console's origin and kept
 * only when it stays there; a control or whitespace character anywhere refuses it, since a browser
 * drops tabs and newlines before parsing (`/<tab>/evil.example` is read `//evil.example`). What is
 * kept is the resolved path and query, never the value as given; at most 1024 characters (it
 * travels in the sign-in's cookie).
 */
export function localPath(path: string): string {
  const refused = '/approvals';
  // Control (Cc), format (Cf) and whitespace characters, and `\`, which browsers read as `/`.
  if (!path.startsWith('/') || path.length > 1024 || /[\p{Cc}\p{Cf}\s\\]/u.test(path)) return refused;
  let url: URL;
  try {
    url = new URL(path, HOME);
  } catch {
    return refused;
  }
  return url.origin === HOME ? `${url.pathname}${url.search}` : refused;
}

function scopeOf(scope: string | undefined): string {
  const words = new Set((scope ?? '').split(/[\s,]+/).filter((w) => w !== ''));
  words.add('openid');
  return [...words].join(' ');
}

/** 32 random bytes, base64url. */
function secret(): string {
  return randomBytes(32).toString('base64url');
}
