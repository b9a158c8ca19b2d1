/**
 * The MCP host's verbs: `mcp-host --mcp-servers FILE` (a host process of its own),
 * `mcp servers` (every MCP mount on the bus: state, tools, held changes) and `mcp accept <name>`.
 */
import { Command, Option } from 'commander';
import type { BusClient } from '../bus/client.js';
import { connectBus } from '../bus/connect.js';
import { MatrixError } from '../bus/errors.js';
import { stderrLogger } from '../bus/log.js';
import { Mounts } from '../bus/subjects.js';
import { acceptMcpChanges, introspectMcpMounts } from '../mcp/host/listing.js';
import type { ListReply } from '../registry/types.js';
import { connectConfig, type Flags, withConnection } from './config.js';
import { ExitCode, json, type Output, processOutput, reportError, table, UsageError } from './output.js';
import { interrupted, verbAction } from './run.js';

/** The flag of the servers file, and its variable. */
export const MCP_SERVERS_FLAG = '--mcp-servers <file>';
export const MCP_SERVERS_ENV = 'MATRIX_MCP_SERVERS';

/** How long `mcp servers` listens for the mounts' discovery answers, in ms. */
const DISCOVERY_WAIT_MS = 500;

/** Most characters of a server's last error in the table (`--json` has all of it). */
const WHY_WIDTH = 160;

/** The `mcp.*` keys of the registry, every page. */
async function registeredMcpKeys(client: BusClient): Promise<string[]> {
  const keys: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.request<ListReply>(Mounts.Tools, '$list', { limit: 500, ...(cursor && { cursor }) });
    keys.push(...page.contexts.map((c) => c.key).filter((k) => k.startsWith('mcp.')));
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return keys;
}

/**
 * `mcp servers`: every MCP mount the registry holds a context of (`mcp.*`) or that answers the
 * whole-bus discovery, each with its `$introspect`, its instances and why one is not ready.
 */
export async function listMcpServers(client: BusClient, args: { json?: boolean }, out: Output): Promise<number> {
  const found = await introspectMcpMounts(client, await registeredMcpKeys(client), DISCOVERY_WAIT_MS);
  if (args.json) {
    out.print(json(found));
    return ExitCode.Ok;
  }
  if (found.length === 0) {
    out.note('no MCP mount answered on this bus');
    return ExitCode.Ok;
  }
  const rows = found.map((f) => [
    f.mount,
    f.state,
    `${f.server?.name ?? ''} ${f.server?.version ?? ''}`.trim(),
    String(f.instances ?? 0),
    String(f.tools?.length ?? 0),
    (f.held ?? []).map((h) => `${h.tool} (${h.change})`).join(', ') || '-',
    f.state !== 'ready' && f.lastError !== undefined ? f.lastError.slice(0, WHY_WIDTH) : '-',
  ]);
  out.print(table(['mount', 'state', 'server', 'instances', 'tools', 'held changes', 'why'], rows));
  return ExitCode.Ok;
}

/** `mcp accept <name> [tools...]`: accepts the held definition changes of one server. */
async function accept(client: BusClient, args: { name: string; tool?: string[] }, out: Output): Promise<number> {
  const { mount, accepted: taken } = await acceptMcpChanges(client, args.name, args.tool);
  out.print(taken.length === 0 ? `${mount}: no held change to accept` : `${mount}: accepted ${taken.join(', ')}`);
  return ExitCode.Ok;
}

/** `mcp-host`: hosts the servers of the file until SIGINT/SIGTERM. */
export async function runMcpHost(flags: Flags, out: Output = processOutput, env = process.env): Promise<number> {
  const file = typeof flags.mcpServers === 'string' ? flags.mcpServers : env[MCP_SERVERS_ENV];
  if (!file) {
    out.note(`error: ${MCP_SERVERS_FLAG} or ${MCP_SERVERS_ENV} names the mcpServers file to host`);
    return ExitCode.Usage;
  }
  try {
    const { loadServersFile } = await import('../mcp/host/config.js');
    const { startMcpHost } = await import('../mcp/host/host.js');
    const configs = loadServersFile(file, env);
    const nc = await connectBus(connectConfig(flags, env, 'matrix-mcp-host'));
    const host = await startMcpHost(nc, { servers: configs, logger: stderrLogger });
    out.note(`mcp host ready: ${host.servers.map((s) => `${s.mountName} (${s.state})`).join(', ')}`);
    const reason = await interrupted();
    out.note(`${reason}: stopping the MCP servers`);
    await host.stop();
    await nc.drain();
    return ExitCode.Ok;
  } catch (err) {
    return err instanceof MatrixError && err.code === 'bad_request'
      ? reportError(new UsageError(err.message), out)
      : reportError(err, out);
  }
}

/** Declares `mcp-host`, and `mcp servers` and `mcp accept` under the bridge's `mcp`. */
export function addMcpHostCommands(program: Command): void {
  withConnection(
    program.command('mcp-host').description('host the MCP servers of an mcpServers file as mounts mcp.<name>'),
  )
    .addOption(new Option(MCP_SERVERS_FLAG, 'the mcpServers file to host').env(MCP_SERVERS_ENV))
    .action(async (flags: Flags) => {
      process.exitCode = await runMcpHost(flags);
    });
  const mcp = program.commands.find((c) => c.name() === 'mcp') ?? program.command('mcp');
  mcp.addCommand(
    withConnection(new Command('servers'))
      .description('every MCP mount on the bus: state, tools, held changes, why one is not ready')
      .option('--json', 'print JSON')
      .action(verbAction(listMcpServers)),
  );
  mcp.addCommand(
    withConnection(new Command('accept'))
      .description("accept an MCP server's held tool definition changes (all, or the named tools)")
      .argument('<name>', 'the server, e.g. fs or mcp.fs')
      .argument('[tool...]', 'only these tools')
      .action(verbAction(accept, 'name', 'tool')),
  );
}
