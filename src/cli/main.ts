#!/usr/bin/env node
/**
 * `matrix-tools`: the command line. `serve` runs the system (as `npm start` does); the other
 * verbs talk to a running one. Exit codes: 0 done; 1 the op or the tool call failed;
 * 2 wrong usage; 3 NATS or the mount unreachable in time.
 *
 * Each group of verbs declares itself (`add…Command(s)(program)`) in its own file; a new verb
 * is a file with its verbs, `(client, args, out)`, and one line here.
 */
import { Command, CommanderError, Option } from 'commander';
import { parseIssuers } from '../identity/gate.js';
import type { McpHttpOptions } from '../mcp/http.js';
import { DEFAULT_IDLE_MS, DEFAULT_MAX_SESSIONS, DEFAULT_MAX_SESSIONS_PER_GRANT } from '../mcp/http-limits.js';
import { DEFAULT_DEFER_THRESHOLD, type DeferOptions } from '../registry/search/search-tool.js';
import { addApprovalCommands } from './approvals.js';
import { addAuthCalloutCommand } from './auth-callout.js';
import { addCheckCommand } from './check.js';
import { addToolCommands } from './commands.js';
import { withConnection } from './config.js';
import { addConsoleCommand } from './console.js';
import { addIdentityCommands } from './grant.js';
import { addMcpHostCommands } from './mcp-host.js';
import { type McpOAuthFlags, oauthResourceOf, withOAuthFlags } from './mcp-oauth.js';
import { ExitCode, reportError, UsageError } from './output.js';
import { verbAction } from './run.js';
import { addServeCommand } from './serve.js';
import { grantContext, type SessionFlags, sessionRequest, withSession } from './session-flags.js';
import { addTaskCommands } from './tasks.js';

const program = new Command('matrix-tools')
  .description('The tool registry and dispatcher of an agent system on NATS.')
  .showHelpAfterError()
  .exitOverride();

addServeCommand(program);
addToolCommands(program);
addApprovalCommands(program);
addTaskCommands(program);
addCheckCommand(program);
addConsoleCommand(program);
addAuthCalloutCommand(program);
addIdentityCommands(program, withSession);
withOAuthFlags(
  withConnection(
    withSession(
      program
        .command('mcp')
        .description("serve a profile's tools over MCP: stdio (for Claude, Cursor, …), or Streamable HTTP with --http"),
    ),
  ),
)
  .option('--http', 'serve MCP Streamable HTTP on --host:--port/mcp instead of stdio')
  .option('--host <host>', 'with --http: address to listen on', '127.0.0.1')
  .option('--port <port>', 'with --http: port to listen on', String(3333))
  .addOption(
    new Option(
      '--trust <nkeys>',
      'with --http: trusted grant issuers; each session then needs Authorization: Bearer <grant> (env: MATRIX_TRUSTED_ISSUERS)',
    ).env('MATRIX_TRUSTED_ISSUERS'),
  )
  .addOption(
    new Option(
      '--allowed-host <host...>',
      'with --http: further Host names to serve (name or name:port; required with --host 0.0.0.0)',
    ).env('MATRIX_MCP_ALLOWED_HOSTS'),
  )
  .addOption(
    new Option('--max-sessions <n>', 'with --http: most MCP sessions open at once (503 past it)')
      .env('MATRIX_MCP_MAX_SESSIONS')
      .default(String(DEFAULT_MAX_SESSIONS)),
  )
  .addOption(
    new Option('--max-sessions-per-grant <n>', 'with --http and --trust: most MCP sessions of one grant (429 past it)')
      .env('MATRIX_MCP_MAX_SESSIONS_PER_GRANT')
      .default(String(DEFAULT_MAX_SESSIONS_PER_GRANT)),
  )
  .addOption(
    new Option('--idle-minutes <m>', 'with --http: close a session no request reached for this long')
      .env('MATRIX_MCP_IDLE_MINUTES')
      .default(String(DEFAULT_IDLE_MS / 60_000)),
  )
  .addOption(
    new Option(
      '--search-threshold <n>',
      'past this many tools a client lists the kept ones and search_tools instead of all',
    )
      .env('MATRIX_MCP_SEARCH_THRESHOLD')
      .default(String(DEFAULT_DEFER_THRESHOLD)),
  )
  .addOption(
    new Option('--search-keep <name...>', 'tools listed even past the search threshold').env('MATRIX_MCP_SEARCH_KEEP'),
  )
  .action(
    verbAction(async (client, args: SessionFlags & McpHttpFlags & McpOAuthFlags) => {
      // Loaded here: the MCP SDK is a third of every other verb's start-up time.
      if (args.http) {
        const { MCP_PATH, serveMcpHttp } = await import('../mcp/http.js');
        const issuers = parseIssuers(args.trust);
        const port = Number(args.port);
        if (!Number.isInteger(port) || port < 0 || port > 65_535)
          throw new UsageError(`--port must be a port number, got ${JSON.stringify(args.port)}`);
        const warn = (line: string) => void process.stderr.write(`mcp bridge: warning: ${line}\n`);
        const oauth = await oauthResourceOf(args, { host: args.host, port, path: MCP_PATH }, client.nc, warn);
        if (oauth === undefined && issuers.length === 0 && !args.profile && !args.grant)
          throw new UsageError(
            '--http needs --trust / MATRIX_TRUSTED_ISSUERS (a grant per client) or a --profile to serve',
          );
        const options: McpHttpOptions = {
          host: args.host,
          port,
          issuers,
          allowedHosts: nameList(args.allowedHost),
          maxSessions: positiveInteger('--max-sessions', args.maxSessions),
          maxSessionsPerGrant: positiveInteger('--max-sessions-per-grant', args.maxSessionsPerGrant),
          idleMs: positiveInteger('--idle-minutes', args.idleMinutes) * 60_000,
          search: searchOptions(args),
          ...(issuers.length === 0 && oauth === undefined
            ? { session: sessionRequest(args), ctx: grantContext(args) }
            : {}),
        };
        if (oauth === undefined) await serveMcpHttp(client.nc, options);
        else await (await import('../mcp/oauth-serve.js')).serveMcpOAuth(client.nc, { ...options, oauth });
        return ExitCode.Ok;
      }
      const { serveMcp } = await import('../mcp/bridge.js');
      await serveMcp(client.nc, sessionRequest(args), grantContext(args), searchOptions(args));
      return ExitCode.Ok;
    }),
  );

addMcpHostCommands(program);

/** The flags of `mcp --http`. */
interface McpHttpFlags {
  http?: boolean;
  host: string;
  port: string;
  trust?: string;
  /** Repeated flags, or the env's comma-separated list (one string). */
  allowedHost?: string[] | string;
  maxSessions: string;
  maxSessionsPerGrant: string;
  idleMinutes: string;
  searchThreshold: string;
  /** Repeated flags, or the env's comma-separated list (one string). */
  searchKeep?: string[] | string;
}

/** When the bridge's clients get `search_tools`: `--search-threshold`, `--search-keep`. */
function searchOptions(args: McpHttpFlags): DeferOptions {
  const threshold = Number(args.searchThreshold);
  if (!Number.isSafeInteger(threshold) || threshold < 0)
    throw new UsageError(
      `--search-threshold must be a whole number of tools (0 or more), got ${JSON.stringify(args.searchThreshold)}`,
    );
  const keep = nameList(args.searchKeep);
  return keep.length === 0 ? { threshold } : { threshold, keep };
}

function nameList(given: string[] | string | undefined): string[] {
  const all = given === undefined ? [] : typeof given === 'string' ? [given] : given;
  return all
    .flatMap((h) => h.split(','))
    .map((h) => h.trim())
    .filter((h) => h !== '');
}

function positiveInteger(flag: string, text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 1)
    throw new UsageError(`${flag} must be a whole number of at least 1, got ${JSON.stringify(text)}`);
  return value;
}

try {
  await program.parseAsync();
} catch (err) {
  process.exitCode =
    err instanceof CommanderError ? (err.exitCode === 0 ? ExitCode.Ok : ExitCode.Usage) : reportError(err);
}
// The one place the CLI ends the process: verbs and serve only set the code.
process.exit(Number(process.exitCode ?? ExitCode.Ok));
