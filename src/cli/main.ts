#!/usr/bin/env node
import type { NatsConnection } from '@nats-io/nats-core';
/**
 * `matrix-tools`: the command line. `serve` runs the system (as `npm start` does); the other
 * verbs talk to a running one. Exit codes: 0 done; 1 the op or the tool call failed;
 * 2 wrong usage; 3 NATS or the mount unreachable in time.
 */
import { Command, CommanderError, Option } from 'commander';
import { type ConnectOptions, connectBus, connectOptionsFromEnv } from '../bus/connect.js';
import * as verbs from './commands.js';
import { serveMcp } from './mcp.js';
import { ExitCode, reportError } from './output.js';
import { serve, serveDefaults } from './serve.js';

/** Connection flags, on every verb; each falls back to its environment variable. */
function withConnection(cmd: Command): Command {
  return cmd
    .addOption(new Option('-s, --server <urls>', 'NATS server URL(s), comma-separated').env('NATS_URL'))
    .addOption(new Option('--user <user>', 'NATS user').env('NATS_USER'))
    .addOption(new Option('--password <password>', 'NATS password').env('NATS_PASSWORD'))
    .addOption(new Option('--token <token>', 'NATS token').env('NATS_TOKEN'))
    .addOption(new Option('--nkey <file>', 'nkey seed file').env('NATS_NKEY'))
    .addOption(new Option('--creds <file>', 'JWT creds file').env('NATS_CREDS'));
}

function withSession(cmd: Command): Command {
  return cmd
    .requiredOption('-p, --profile <name>', 'agent profile (default, explain, monitor, edit, propose, evaluate, …)')
    .option('-w, --worker <name>', 'worker, e.g. claude-code or codex')
    .option('--refs <keys>', 'tool context refs, comma-separated (skips the built-in rules)')
    .option('--skill <name=refs>', 'a skill and its refs, e.g. review=repo-coding (repeatable)', (v: string, prev: string[] = []) => [...prev, v])
    .option('--requires <capabilities>', 'required capabilities, comma-separated')
    .option('--environment <json>', 'the worker environment, e.g. {"repoRoot":"/src"}')
    .option('--only-available', 'leave out tools whose target has no live instance')
    .option('--strict', 'with --format openai: strict-mode parameters');
}

function connectOptions(flags: Record<string, string | undefined>): ConnectOptions {
  const o = connectOptionsFromEnv();
  if (flags.server) o.servers = flags.server;
  if (flags.user) o.user = flags.user;
  if (flags.password) o.pass = flags.password;
  if (flags.token) o.token = flags.token;
  if (flags.nkey) o.nkeyFile = flags.nkey;
  if (flags.creds) o.credsFile = flags.creds;
  return { ...o, name: 'matrix-tools-cli' };
}

/** Connects, runs a verb, drains, and exits with the verb's code. */
// biome-ignore lint/suspicious/noExplicitAny: commander passes each verb its own argument types
function run(action: (nc: NatsConnection, ...args: any[]) => Promise<number>) {
  return async (...args: unknown[]): Promise<void> => {
    const cmd = args[args.length - 1] as Command;
    const flags = cmd.optsWithGlobals() as Record<string, string | undefined>;
    let code: number;
    let nc: NatsConnection | undefined;
    const options = connectOptions(flags);
    try {
      nc = await connectBus(options);
    } catch (err) {
      process.stderr.write(`error: cannot reach NATS at ${options.servers}: ${(err as Error).message} (start it, or pass --server / NATS_URL)\n`);
      process.exit(ExitCode.Unreachable);
    }
    try {
      code = await action(nc, ...args.slice(0, -2), flags);
    } catch (err) {
      code = reportError(err);
    }
    await nc?.drain().catch(() => {});
    process.exit(code);
  };
}

const program = new Command('matrix-tools').description('The tool registry and dispatcher of an agent system on NATS.').showHelpAfterError().exitOverride();

withConnection(
  program
    .command('serve')
    .description('run system.tools, system.dispatcher and the reference mounts (what npm start runs)')
    .option('--no-registry', 'do not mount system.tools')
    .option('--no-dispatcher', 'do not mount system.dispatcher')
    .option('--no-reference', 'do not mount system.agents, .sessions, .traces, .packages, .approvals')
    .addOption(new Option('--policy <file>', 'approval policy file (JSON)').env('MATRIX_APPROVAL_POLICY'))
    .addOption(new Option('--bucket <name>', 'KV bucket of registered contexts').env('MATRIX_TOOLS_BUCKET'))
    .addOption(new Option('--sessions-bucket <name>', 'KV bucket of session state').env('MATRIX_SESSIONS_BUCKET'))
    .addOption(new Option('--metrics-port <port>', 'serve Prometheus metrics on this port (/metrics)').env('MATRIX_METRICS_PORT')),
).action(async (flags: Record<string, string | boolean | undefined>) => {
  const defaults = serveDefaults();
  await serve({
    ...defaults,
    connect: connectOptions(flags as Record<string, string | undefined>),
    registry: flags.registry !== false,
    dispatcher: flags.dispatcher !== false,
    reference: flags.reference !== false,
    ...(typeof flags.policy === 'string' ? { policy: flags.policy } : {}),
    ...(typeof flags.bucket === 'string' ? { bucket: flags.bucket } : {}),
    ...(typeof flags.sessionsBucket === 'string' ? { sessionsBucket: flags.sessionsBucket } : {}),
    ...(typeof flags.metricsPort === 'string' ? { metricsPort: Number(flags.metricsPort) } : {}),
  });
});

withConnection(
  program.command('list').description('list the tool contexts').option('--tool <name>', 'only contexts with this tool').option('--json', 'print JSON'),
).action(run((nc, flags) => verbs.list(nc, flags)));

withConnection(
  withSession(program.command('resolve').description('show the tools a profile gets'))
    .addOption(new Option('--format <format>', 'add providerTools in this format').choices(['matrix', 'openai', 'anthropic', 'mcp']))
    .option('--json', 'print the whole ResolvedToolContext'),
).action(run((nc, flags) => verbs.resolve(nc, flags)));

withConnection(
  withSession(program.command('call').description('call a tool through system.dispatcher').argument('<tool>', 'tool name'))
    .option('-a, --args <json>', 'the arguments, a JSON object', '{}')
    .option('--session <id>', 'Matrix-Session')
    .option('--principal <id>', 'Matrix-Principal')
    .option('--traceparent <traceparent>', 'W3C traceparent (a new trace by default)')
    .option('--timeout <ms>', 'how long to wait', '65000')
    .option('--json', 'print the whole ToolResult'),
).action(run((nc, tool, flags) => verbs.call(nc, tool, flags)));

withConnection(
  program
    .command('introspect')
    .description('the live mounts, or one mount in full')
    .argument('[mount]', 'a mount, e.g. system.tools')
    .option('--json', 'print JSON'),
).action(run((nc, mount, flags) => verbs.introspect(nc, mount, flags)));

withConnection(
  program
    .command('register')
    .description('register tool contexts from a JSON file (a spec or an array)')
    .argument('<file>')
    .option('--expected-revision <n>', 'compare-and-set: 0 = only if new'),
).action(run((nc, file, flags) => verbs.register(nc, file, flags)));

withConnection(
  program.command('unregister').description('remove a registered tool context').argument('<key>').option('--expected-revision <n>', 'compare-and-set'),
).action(run((nc, key, flags) => verbs.unregister(nc, key, flags)));

withConnection(
  program
    .command('watch')
    .description('print registry changes until Ctrl-C')
    .option('--calls', 'also print every tool call')
    .option('--json', 'one JSON object per line'),
).action(run((nc, flags) => verbs.watch(nc, flags)));

withConnection(withSession(program.command('mcp').description("serve a profile's tools over MCP stdio (for Claude, Cursor, …)"))).action(
  run(async (nc, flags) => {
    await serveMcp(nc, verbs.sessionRequest(flags));
    return ExitCode.Ok;
  }),
);

try {
  await program.parseAsync();
} catch (err) {
  if (err instanceof CommanderError) process.exit(err.exitCode === 0 ? 0 : ExitCode.Usage);
  process.exit(reportError(err));
}
