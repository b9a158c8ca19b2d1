/** `matrix-tools console`: the web console (src/console) on this machine, until Ctrl-C. */
import type { NatsConnection } from '@nats-io/nats-core';
import { type Command, InvalidArgumentError } from 'commander';
import { isLoopback, startConsole } from '../console/server.js';
import { ExitCode } from './output.js';

/** Flags of the `console` verb. */
export interface ConsoleFlags {
  port?: number;
  host?: string;
  allowWrites?: boolean;
}

/** Declares the `console` verb on `program`; the caller adds the connection flags and the action. */
export function consoleCommand(program: Command): Command {
  return program
    .command('console')
    .description('serve the web console: contexts, resolve, calls, mounts, try a tool')
    .option('--port <n>', 'port to listen on (0: any free one)', portNumber, 8080)
    .option('--host <address>', 'address to bind (127.0.0.1: this machine only)', '127.0.0.1')
    .option('--allow-writes', 'allow trying tools and registering contexts, behind a token printed at start');
}

function portNumber(text: string): number {
  const port = Number(text);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidArgumentError('a port is an integer from 0 to 65535');
  return port;
}

/** Runs the console until SIGINT or SIGTERM. */
export async function runConsole(nc: NatsConnection, flags: ConsoleFlags): Promise<number> {
  const running = await startConsole(nc, { port: flags.port ?? 8080, host: flags.host ?? '127.0.0.1', allowWrites: flags.allowWrites === true });
  const contexts = running.index.error
    ? `registry not answering yet: ${running.index.error}`
    : `${running.index.size.toLocaleString('en')} contexts, listed in ${running.index.loadMs.toFixed(0)} ms`;
  const token = running.token ? `write token: ${running.token}\n` : '';
  const exposed = isLoopback(flags.host ?? '127.0.0.1') ? '' : `warning: bound to ${flags.host}: whoever reaches it reads the registry and the audit trail\n`;
  // One write, so whoever waits for the ready line has the token with it.
  process.stderr.write(`${exposed}${token}console ready on ${running.url} (${running.token ? 'writes allowed' : 'read-only'}; ${contexts})\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await running.close();
  return ExitCode.Ok;
}
