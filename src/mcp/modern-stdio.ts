/**
 * MCP 2026-07-28 on stdio: a client whose first message carries the 2026 `_meta` envelope
 * (`server/discover`, or any request of the revision) is served by the SDK 2.x `serveStdio`, each
 * message framed and checked by it; any other first message keeps the 2025-11-25 bridge
 * (src/mcp/bridge.ts). The first line is read before either starts and handed back to stdin.
 * A 2026 client that opens `subscriptions/listen` with `toolsListChanged` hears when its tools
 * change: the connection's server sends `list_changed`, and the SDK's stdio entry puts it on each
 * subscription that asked for it (with none open, nothing goes out).
 */
import type { Readable } from 'node:stream';
import { StdioServerTransport, serveStdio } from '@modelcontextprotocol/server/stdio';
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient } from '../bus/client.js';
import type { CallContext } from '../bus/context.js';
import type { DeferOptions } from '../registry/search/search-tool.js';
import type { ResolveRequest } from '../registry/types.js';
import { wellFormedLines } from './input.js';
import { modernServer, resolveTools } from './modern.js';
import { ToolChangeFeed } from './modern-changes.js';

/** The `_meta` key whose presence marks a 2026-07-28 request. */
const PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion';

/**
 * Reads stdin's first line and puts it back; resolves whether it is a 2026-07-28 request (false
 * when stdin ends first or the line is no JSON-RPC request with the envelope).
 */
export function firstLineIsModern(stdin: Readable): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const chunks: Buffer[] = [];
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      if (!chunk.includes(0x0a)) return;
      stdin.off('data', onData);
      stdin.off('end', onEnd);
      stdin.pause();
      const all = Buffer.concat(chunks);
      stdin.unshift(all);
      resolve(isModern(all.subarray(0, all.indexOf(0x0a)).toString('utf8')));
    };
    const onEnd = () => {
      stdin.off('data', onData);
      if (chunks.length > 0) stdin.unshift(Buffer.concat(chunks));
      resolve(false);
    };
    stdin.on('data', onData);
    stdin.once('end', onEnd);
  });
}

function isModern(line: string): boolean {
  try {
    const message = JSON.parse(line) as { params?: { _meta?: Record<string, unknown> } };
    return typeof message?.params?._meta?.[PROTOCOL_VERSION] === 'string';
  } catch {
    return false;
  }
}

/**
 * Serves 2026-07-28 on stdio for `session` until stdin ends or a signal comes; past `search`'s
 * threshold the client lists the kept tools and `search_tools`.
 */
export async function serveModernStdio(
  nc: NatsConnection,
  session: ResolveRequest,
  ctx: CallContext,
  search: DeferOptions = {},
): Promise<void> {
  const client = new BusClient(nc, { timeoutMs: 10_000 });
  const input = process.stdin.pipe(
    wellFormedLines((response) => process.stdout.write(`${JSON.stringify(response)}\n`)),
  );
  const caller = { session, ctx };
  const changes = new ToolChangeFeed(nc, (who) => resolveTools(client, who), log);
  const handle = serveStdio(
    () => {
      const server = modernServer(client, caller, search);
      changes.listen(caller, (event) => {
        const params = event.params;
        server
          .notification({ method: 'notifications/tools/list_changed', ...(params === undefined ? {} : { params }) })
          .catch(() => {});
      });
      return server;
    },
    {
      legacy: 'reject',
      transport: new StdioServerTransport(input, process.stdout),
      onerror: (err) => log(`2026-07-28 request: ${err.message}`),
    },
  );
  const reason = await new Promise<string>((resolve) => {
    input.once('end', () => resolve('stdin ended'));
    process.stdout.on('error', (err) => resolve(`client gone (${err.message})`));
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
  log(`${reason}; closing (2026-07-28)`);
  changes.close();
  await handle.close();
  client.close();
}

function log(line: string): void {
  process.stderr.write(`mcp bridge: ${line}\n`);
}
