/** `matrix-tools console`: the web console (src/console) on this machine, until Ctrl-C. */
import { type Command, InvalidArgumentError, Option } from 'commander';
import type { BusClient } from '../bus/client.js';
import { startConsole } from '../console/server.js';
import { loadGrant } from '../identity/granted.js';
import { isLoopback } from '../loopback.js';
import { withConnection } from './config.js';
import { ExitCode, type Output, UsageError } from './output.js';
import { interrupted, verbAction } from './run.js';

/** Flags of the `console` verb. */
export interface ConsoleFlags {
  port?: number;
  host?: string;
  allowWrites?: boolean;
  approverGrant?: string;
  oidcIssuer?: string;
  oidcClientId?: string;
  oidcRedirectUri?: string;
  oidcAudience?: string;
  oidcScope?: string;
}

/** Declares the `console` verb with the connection flags. */
export function addConsoleCommand(program: Command): void {
  withConnection(program.command('console'))
    .description('serve the web console: contexts, resolve, calls, mounts, try a tool')
    .option('--port <n>', 'port to listen on (0: any free one)', portNumber, 8080)
    .option('--host <address>', 'address to bind (127.0.0.1: this machine only)', '127.0.0.1')
    .option('--allow-writes', 'allow trying tools and registering contexts, behind a token printed at start')
    .option('--approver-grant <file>', 'an approver grant (nats.approve) to list and answer approvals with')
    .addOption(
      new Option(
        '--oidc-issuer <url>',
        'sign people in through this OpenID Connect issuer (authorization code with PKCE); they answer approvals with its access token (env: MATRIX_CONSOLE_OIDC_ISSUER)',
      ).env('MATRIX_CONSOLE_OIDC_ISSUER'),
    )
    .addOption(
      new Option(
        '--oidc-client-id <id>',
        "with --oidc-issuer: the console's client id there, a public client (env: MATRIX_CONSOLE_OIDC_CLIENT_ID)",
      ).env('MATRIX_CONSOLE_OIDC_CLIENT_ID'),
    )
    .addOption(
      new Option(
        '--oidc-redirect-uri <url>',
        'with --oidc-issuer: the redirect URI registered for that client (env: MATRIX_CONSOLE_OIDC_REDIRECT_URI; default: http://<host>:<port>/auth/callback)',
      ).env('MATRIX_CONSOLE_OIDC_REDIRECT_URI'),
    )
    .addOption(
      new Option(
        '--oidc-audience <resource>',
        "with --oidc-issuer: the resource access tokens are asked for, serve's --oidc-audience (env: MATRIX_OIDC_AUDIENCE)",
      ).env('MATRIX_OIDC_AUDIENCE'),
    )
    .addOption(
      new Option(
        '--oidc-scope <scopes>',
        'with --oidc-issuer: scopes asked beside openid, space-separated (env: MATRIX_CONSOLE_OIDC_SCOPE; default: none)',
      ).env('MATRIX_CONSOLE_OIDC_SCOPE'),
    )
    .action(verbAction(runConsole));
}

function portNumber(text: string): number {
  const port = Number(text);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new InvalidArgumentError('a port is an integer from 0 to 65535');
  return port;
}

/** Runs the console until SIGINT or SIGTERM. */
export async function runConsole(client: BusClient, flags: ConsoleFlags, out: Output): Promise<number> {
  const signIn = signInOf(flags, flags.port ?? 8080);
  const running = await startConsole(client.nc, {
    port: flags.port ?? 8080,
    host: flags.host ?? '127.0.0.1',
    allowWrites: flags.allowWrites === true,
    ...(flags.approverGrant ? { approverGrant: loadGrant(flags.approverGrant) } : {}),
    ...(signIn === undefined ? {} : { signIn }),
  }).catch((err: Error) => {
    throw signIn !== undefined && /sign-in|OIDC issuer/.test(err.message)
      ? new UsageError(`--oidc-issuer: ${err.message}`)
      : err;
  });
  if (running.signInProblem !== undefined) out.note(`warning: ${running.signInProblem}`);
  const signedIn =
    running.redirectUri === undefined ? '' : `sign-in through ${signIn?.issuer}, back at ${running.redirectUri}\n`;
  const contexts = running.index.error
    ? `registry not answering yet: ${running.index.error}`
    : `${running.index.size.toLocaleString('en')} contexts, listed in ${running.index.loadMs.toFixed(0)} ms`;
  const token = running.token ? `write token: ${running.token}\n` : '';
  const exposed = isLoopback(flags.host ?? '127.0.0.1')
    ? ''
    : `warning: bound to ${flags.host}: whoever reaches it reads the registry and the audit trail\n`;
  // One write, so whoever waits for the ready line has the token with it.
  out.note(
    `${exposed}${token}${signedIn}console ready on ${running.url} (${running.token ? 'writes allowed' : 'read-only'}; ${contexts})`,
  );
  await interrupted();
  await running.close();
  return ExitCode.Ok;
}

/** The sign-in the flags ask for; undefined without `--oidc-issuer`; a usage error naming what is missing. */
function signInOf(
  flags: ConsoleFlags,
  port: number,
): { issuer: string; clientId: string; audience: string; redirectUri?: string; scope?: string } | undefined {
  if (!flags.oidcIssuer) {
    if (flags.oidcClientId || flags.oidcRedirectUri || flags.oidcScope)
      throw new UsageError('--oidc-client-id, --oidc-redirect-uri and --oidc-scope go with --oidc-issuer');
    return undefined;
  }
  if (!flags.oidcClientId)
    throw new UsageError("--oidc-issuer needs --oidc-client-id (MATRIX_CONSOLE_OIDC_CLIENT_ID): the console's client");
  if (!flags.oidcAudience)
    throw new UsageError(
      "--oidc-issuer needs --oidc-audience (MATRIX_OIDC_AUDIENCE): the resource the service's tokens name",
    );
  if (!flags.oidcRedirectUri && port === 0)
    throw new UsageError(
      '--oidc-issuer with --port 0 needs --oidc-redirect-uri: the address the IdP sends people back to',
    );
  return {
    issuer: flags.oidcIssuer,
    clientId: flags.oidcClientId,
    audience: flags.oidcAudience,
    ...(flags.oidcRedirectUri ? { redirectUri: flags.oidcRedirectUri } : {}),
    ...(flags.oidcScope ? { scope: flags.oidcScope } : {}),
  };
}
