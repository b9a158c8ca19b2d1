/** `matrix-tools console`: the web console (src/console) on this machine, until Ctrl-C. */
import { type Command, InvalidArgumentError } from 'commander';
import type { BusClient } from '../bus/client.js';
import { startConsole } from '../console/server.js';
import { loadGrant } from '../identity/granted.js';
import { isLoopback } from '../loopback.js';
import { withConnection } from './config.js';
import { ExitCode, type Output } from './output.js';
import { interrupted, verbAction } from './run.js';

/** Flags of the `console` verb. */
export interface ConsoleFlags {
  port?: number;
  host?: string;
  allowWrites?: boolean;
  approverGrant?: string;
}

/** Declares the `console` verb with the connection flags. */
export function addConsoleCommand(program: Command): void {
  withConnection(program.command('console'))
    .description('serve the web console: contexts, resolve, calls, mounts, try a tool')
    .option('--port <n>', 'port to listen on (0: any free one)', portNumber, 8080)
    .option('--host <address>', 'address to bind (127.0.0.1: this machine only)', '127.0.0.1')
    .option('--allow-writes', 'allow trying tools and registering contexts, behind a token printed at start')
    .option('--approver-grant <file>', 'an approver grant (nats.approve) to list and answer approvals with')
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
  const running = await startConsole(client.nc, {
    port: flags.port ?? 8080,
    host: flags.host ?? '127.0.0.1',
    allowWrites: flags.allowWrites === true,
    ...(flags.approverGrant ? { approverGrant: loadGrant(flags.approverGrant) } : {}),
  });
  const contexts = running.index.error
    ? `registry not answering yet: ${running.index.error}`
    : `${running.index.size.toLocaleString('en')} contexts, listed in ${running.index.loadMs.toFixed(0)} ms`;
  const token = running.token ? `write token: ${running.token}\n` : '';
  const exposed = isLoopback(flags.host ?? '127.0.0.1')
    ? ''
    : `warning: bound to ${flags.host}: whoever reaches it reads the registry and the audit trail\n`;
  // One write, so whoever waits for the ready line has the token with it.
  out.note(
    `${exposed}${token}console ready on ${running.url} (${running.token ? 'writes allowed' : 'read-only'}; ${contexts})`,
  );
  await interrupted();
  await running.close();
  return ExitCode.Ok;
}
