/**
 * The `mcpServers` file (PROTOCOL 12): the file MCP clients already use, with our own keys under
 * `"matrix"` in a server's entry. Values read the host's environment as `${env:VAR}`; a secret
 * lives there, never in the file. Every mistake is named with its path, and no value of the
 * environment is ever printed.
 */
import { readFileSync } from 'node:fs';
import { BadRequestError } from '../../bus/errors.js';

/** How a server's tools are gated (PROTOCOL 12 "Approval from annotations"). */
export const ApprovalRule = { Destructive: 'destructive', Always: 'always', Never: 'never' } as const;
export type ApprovalRule = (typeof ApprovalRule)[keyof typeof ApprovalRule];

/** What a changed tool definition does: wait for an operator, or be taken at once. */
export const OnChange = { Hold: 'hold', Accept: 'accept' } as const;
export type OnChange = (typeof OnChange)[keyof typeof OnChange];

/** Per-tool settings, by the tool's MCP name. */
export interface ToolSettings {
  /** Overrides the server's rule for this tool. */
  approval?: ApprovalRule;
  /** Leave the tool out of the registry (its op answers `not_found`). */
  hidden?: boolean;
}

/** Our keys of one server (`"matrix"` in its entry), defaults filled in. */
export interface MatrixSettings {
  /** Put before every tool's name; default `<name>_`. */
  prefix: string;
  /** Default `destructive`. */
  approval: ApprovalRule;
  /** Default `hold`. */
  onChange: OnChange;
  /** The context's `timeoutMs`: the longest a call may take, in ms; unset: the registry's default. */
  timeoutMs?: number;
  tools: Record<string, ToolSettings>;
}

/** A server the host spawns and speaks to over stdio. */
export interface StdioServer {
  kind: 'stdio';
  name: string;
  command: string;
  args: string[];
  /** Its own variables, added to PATH, HOME, LANG and TMPDIR of the host. */
  env: Record<string, string>;
  cwd?: string;
  matrix: MatrixSettings;
}

/** A remote server the host reaches over Streamable HTTP. */
export interface HttpServer {
  kind: 'http';
  name: string;
  url: URL;
  /** Sent with every request (an `Authorization` header, say). */
  headers: Record<string, string>;
  /** Client credentials for a server that is an OAuth protected resource; none: no OAuth. */
  oauth?: OAuthClientCredentials;
  matrix: MatrixSettings;
}

/**
 * `"oauth"` of a remote server: the host is an OAuth client of the server's authorization server
 * and gets its access tokens by the client-credentials grant (MCP authorization; RFC 6749 4.4).
 */
export interface OAuthClientCredentials {
  clientId: string;
  /** Read from the environment only (`${env:VAR}`); never logged, never in `$introspect`. */
  clientSecret: string;
  /** Space-separated scopes to ask for; none: the authorization server's default. */
  scope?: string;
  /**
   * The authorization server these credentials belong to: the secret is sent to it only, and a
   * server that names another is refused. None: the one the server's metadata names (RFC 9728).
   */
  issuer?: string;
  /** The token endpoint, used without discovery (for a server that publishes no metadata). */
  tokenUrl?: string;
}

/** One server of the file, its `${env:VAR}` values read. */
export type ServerConfig = StdioServer | HttpServer;

/** A server's name: the mount is `mcp.<name>`. */
export const SERVER_NAME = /^[a-z0-9_-]{1,32}$/;
const PREFIX = /^[a-zA-Z0-9_-]{0,32}$/;
const MAX_TIMEOUT_MS = 3_600_000;
const STDIO_KEYS = new Set(['command', 'args', 'env', 'cwd', 'matrix', 'type']);
const HTTP_KEYS = new Set(['url', 'headers', 'oauth', 'matrix', 'type']);
const OAUTH_KEYS = new Set(['clientId', 'clientSecret', 'scope', 'issuer', 'tokenUrl']);
/** A whole value that is one `${env:VAR}`. */
const ENV_ONLY = /^\$\{env:[A-Za-z_][A-Za-z0-9_]*\}$/;
/** Scope tokens (RFC 6749 3.3): printable ASCII but space, `"` and `\`, separated by spaces. */
const SCOPE = /^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$/;
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);
const MATRIX_KEYS = new Set(['prefix', 'approval', 'onChange', 'timeoutMs', 'tools']);

/** Reads and checks the file at `path`; throws `BadRequestError` naming every mistake. */
export function loadServersFile(path: string, env: NodeJS.ProcessEnv = process.env): ServerConfig[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new BadRequestError(`cannot read the MCP servers file ${path}: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new BadRequestError(`the MCP servers file ${path} is not JSON: ${(err as Error).message}`);
  }
  return parseServers(parsed, env, path);
}

/** Checks a parsed `mcpServers` document; throws `BadRequestError` naming every mistake. */
export function parseServers(doc: unknown, env: NodeJS.ProcessEnv = process.env, source = 'the file'): ServerConfig[] {
  const problems: string[] = [];
  const servers: ServerConfig[] = [];
  const root = isObject(doc) ? doc.mcpServers : undefined;
  if (!isObject(root)) throw new BadRequestError(`${source}: expected {"mcpServers": {"<name>": {…}}}`);
  for (const [name, entry] of Object.entries(root)) {
    const at = `/mcpServers/${name}`;
    if (!SERVER_NAME.test(name)) problems.push(`${at}: a server's name is [a-z0-9_-]{1,32}`);
    const server = parseServer(name, entry, at, env, problems);
    if (server !== undefined) servers.push(server);
  }
  if (problems.length > 0)
    throw new BadRequestError(`${source} is not a valid MCP servers file: ${problems.join('; ')}`, {
      details: { violations: problems.map((p) => ({ path: p.split(':')[0] as string, message: p, keyword: 'mcp' })) },
    });
  return servers;
}

function parseServer(
  name: string,
  entry: unknown,
  at: string,
  env: NodeJS.ProcessEnv,
  problems: string[],
): ServerConfig | undefined {
  if (!isObject(entry)) {
    problems.push(`${at}: expected an object with "command" or "url"`);
    return undefined;
  }
  const read = (value: string, path: string) => substitute(value, env, path, problems);
  const matrix = parseMatrix(name, entry.matrix, `${at}/matrix`, problems);
  if (typeof entry.command === 'string' && entry.url === undefined) {
    if (entry.oauth !== undefined) problems.push(`${at}/oauth: only a remote server ("url") takes OAuth credentials`);
    unknownKeys(entry, entry.oauth === undefined ? STDIO_KEYS : new Set([...STDIO_KEYS, 'oauth']), at, problems);
    const args = stringList(entry.args, `${at}/args`, problems).map((a, i) => read(a, `${at}/args/${i}`));
    const vars = stringMap(entry.env, `${at}/env`, problems);
    const server: StdioServer = {
      kind: 'stdio',
      name,
      command: read(entry.command, `${at}/command`),
      args,
      env: Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, read(v, `${at}/env/${k}`)])),
      matrix,
    };
    if (typeof entry.cwd === 'string') server.cwd = read(entry.cwd, `${at}/cwd`);
    else if (entry.cwd !== undefined) problems.push(`${at}/cwd: expected a string`);
    return server;
  }
  if (typeof entry.url === 'string' && entry.command === undefined) {
    unknownKeys(entry, HTTP_KEYS, at, problems);
    const headers = stringMap(entry.headers, `${at}/headers`, problems);
    let url: URL | undefined;
    try {
      url = new URL(read(entry.url, `${at}/url`));
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http(s)');
    } catch {
      problems.push(`${at}/url: expected an http or https URL`);
      return undefined;
    }
    const server: HttpServer = {
      kind: 'http',
      name,
      url,
      headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, read(v, `${at}/headers/${k}`)])),
      matrix,
    };
    if (entry.oauth !== undefined) {
      const oauth = parseOAuth(entry.oauth, `${at}/oauth`, read, problems);
      if (Object.keys(headers).some((h) => h.toLowerCase() === 'authorization'))
        problems.push(`${at}/oauth: the host sends its own access token; drop the Authorization header`);
      if (oauth !== undefined) server.oauth = oauth;
    }
    return server;
  }
  problems.push(`${at}: expected either "command" (a stdio server) or "url" (a Streamable HTTP server), not both`);
  return undefined;
}

function parseOAuth(
  value: unknown,
  at: string,
  read: (value: string, path: string) => string,
  problems: string[],
): OAuthClientCredentials | undefined {
  if (!isObject(value)) {
    problems.push(`${at}: expected {"clientId", "clientSecret", "scope"?, "issuer"?, "tokenUrl"?}`);
    return undefined;
  }
  unknownKeys(value, OAUTH_KEYS, at, problems);
  const count = problems.length;
  const text = (key: string): string | undefined => {
    const v = value[key];
    if (v === undefined) return undefined;
    if (typeof v === 'string' && v !== '') return read(v, `${at}/${key}`);
    problems.push(`${at}/${key}: expected a non-empty string`);
    return undefined;
  };
  const clientId = text('clientId');
  if (value.clientId === undefined) problems.push(`${at}/clientId: required`);
  if (value.clientSecret === undefined) problems.push(`${at}/clientSecret: required, as \${env:VAR}`);
  else if (typeof value.clientSecret === 'string' && !ENV_ONLY.test(value.clientSecret))
    problems.push(`${at}/clientSecret: write it as \${env:VAR}; a secret is never written in the file`);
  const clientSecret = text('clientSecret');
  const scope = text('scope');
  if (scope !== undefined && !SCOPE.test(scope))
    problems.push(`${at}/scope: expected scope words separated by single spaces (RFC 6749 3.3)`);
  const issuer = authServerUrl(text('issuer'), `${at}/issuer`, problems);
  const tokenUrl = authServerUrl(text('tokenUrl'), `${at}/tokenUrl`, problems);
  if (problems.length > count || clientId === undefined || clientSecret === undefined) return undefined;
  const oauth: OAuthClientCredentials = { clientId, clientSecret };
  if (scope !== undefined) oauth.scope = scope;
  if (issuer !== undefined) oauth.issuer = issuer;
  if (tokenUrl !== undefined) oauth.tokenUrl = tokenUrl;
  return oauth;
}

/** An authorization server's URL: https, or http on a loopback host (OAuth 2.1 section 1.5); no fragment. */
function authServerUrl(value: string | undefined, at: string, problems: string[]): string | undefined {
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    problems.push(`${at}: expected a URL`);
    return undefined;
  }
  if (url.hash !== '' || url.search !== '') problems.push(`${at}: expected a URL without query or fragment`);
  else if (url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK.has(url.hostname))) return value;
  else problems.push(`${at}: expected an https URL (http only on a loopback host)`);
  return undefined;
}

function parseMatrix(name: string, value: unknown, at: string, problems: string[]): MatrixSettings {
  const settings: MatrixSettings = { prefix: `${name}_`, approval: 'destructive', onChange: 'hold', tools: {} };
  if (value === undefined) return settings;
  if (!isObject(value)) {
    problems.push(`${at}: expected an object`);
    return settings;
  }
  unknownKeys(value, MATRIX_KEYS, at, problems);
  if (value.prefix !== undefined) {
    if (typeof value.prefix === 'string' && PREFIX.test(value.prefix)) settings.prefix = value.prefix;
    else problems.push(`${at}/prefix: expected [a-zA-Z0-9_-]{0,32}`);
  }
  if (value.approval !== undefined) settings.approval = approvalRule(value.approval, `${at}/approval`, problems);
  if (value.onChange !== undefined) {
    if (value.onChange === 'hold' || value.onChange === 'accept') settings.onChange = value.onChange;
    else problems.push(`${at}/onChange: expected "hold" or "accept"`);
  }
  if (value.timeoutMs !== undefined) {
    const t = value.timeoutMs;
    if (Number.isInteger(t) && (t as number) >= 1 && (t as number) <= MAX_TIMEOUT_MS) settings.timeoutMs = t as number;
    else problems.push(`${at}/timeoutMs: expected a whole number of ms from 1 to ${MAX_TIMEOUT_MS}`);
  }
  if (value.tools !== undefined) {
    if (!isObject(value.tools)) problems.push(`${at}/tools: expected {"<tool>": {approval?, hidden?}}`);
    else
      for (const [tool, t] of Object.entries(value.tools)) {
        const path = `${at}/tools/${tool}`;
        if (!isObject(t)) {
          problems.push(`${path}: expected {approval?, hidden?}`);
          continue;
        }
        unknownKeys(t, new Set(['approval', 'hidden']), path, problems);
        const entry: ToolSettings = {};
        if (t.approval !== undefined) entry.approval = approvalRule(t.approval, `${path}/approval`, problems);
        if (t.hidden !== undefined) {
          if (typeof t.hidden === 'boolean') entry.hidden = t.hidden;
          else problems.push(`${path}/hidden: expected true or false`);
        }
        settings.tools[tool] = entry;
      }
  }
  return settings;
}

function approvalRule(value: unknown, at: string, problems: string[]): ApprovalRule {
  if (value === 'destructive' || value === 'always' || value === 'never') return value;
  problems.push(`${at}: expected "destructive", "always" or "never"`);
  return 'destructive';
}

/** `${env:VAR}` → the host's variable; an unset one is a problem named by path and variable, never by value. */
function substitute(value: string, env: NodeJS.ProcessEnv, at: string, problems: string[]): string {
  return value.replace(/\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, variable: string) => {
    const found = env[variable];
    if (found === undefined) {
      problems.push(`${at}: reads \${env:${variable}}, which is not set`);
      return '';
    }
    return found;
  });
}

function stringList(value: unknown, at: string, problems: string[]): string[] {
  if (value === undefined) return [];
  if (Array.isArray(value) && value.every((v) => typeof v === 'string')) return value as string[];
  problems.push(`${at}: expected an array of strings`);
  return [];
}

function stringMap(value: unknown, at: string, problems: string[]): Record<string, string> {
  if (value === undefined) return {};
  if (isObject(value) && Object.values(value).every((v) => typeof v === 'string'))
    return value as Record<string, string>;
  problems.push(`${at}: expected an object of strings`);
  return {};
}

function unknownKeys(value: Record<string, unknown>, known: ReadonlySet<string>, at: string, problems: string[]): void {
  for (const key of Object.keys(value))
    if (!known.has(key)) problems.push(`${at}/${key}: unknown key (known: ${[...known].join(', ')})`);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
