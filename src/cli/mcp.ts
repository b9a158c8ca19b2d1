/**
 * `mcp --profile P`: the tools of a resolved context, served over MCP on stdio, so Claude,
 * Cursor or any MCP client can use the bus tools. `tools/list` comes from `$resolve` (MCP
 * format), `tools/call` goes through the dispatcher, and a registry change sends
 * `notifications/tools/list_changed`. Stdout is the MCP channel: logs go to stderr.
 */

import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, type CallToolResult, ListToolsRequestSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient } from '../bus/client.js';
import { Mounts } from '../bus/subjects.js';
import { Dispatcher } from '../dispatcher/dispatcher.js';
import { watchRegistry } from '../registry/events.js';
import { REGISTRY_VERSION } from '../registry/mount.js';
import type { ResolvedToolContext, ResolveRequest } from '../registry/types.js';

/** Serves `session`'s tools over MCP stdio until the client disconnects. */
export async function serveMcp(nc: NatsConnection, session: ResolveRequest): Promise<void> {
  const request: ResolveRequest = { ...session, format: 'mcp' };
  const client = new BusClient(nc, { timeoutMs: 10_000 });
  const dispatcher = new Dispatcher(nc);
  const server = new Server({ name: 'matrix-tools', version: REGISTRY_VERSION }, { capabilities: { tools: { listChanged: true } } });

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const resolved = await client.request<ResolvedToolContext>(Mounts.Tools, '$resolve', request);
    return { tools: (resolved.providerTools ?? []) as Tool[] };
  });
  server.setRequestHandler(CallToolRequestSchema, async (req, extra): Promise<CallToolResult> => {
    const result = await dispatcher.call(request, { id: String(extra.requestId), name: req.params.name, arguments: req.params.arguments ?? {} });
    const reply: CallToolResult = { content: [{ type: 'text', text: result.content }], isError: result.isError };
    const structured = result.structured;
    if (structured !== null && typeof structured === 'object' && !Array.isArray(structured)) reply.structuredContent = structured as Record<string, unknown>;
    return reply;
  });

  const stopWatching = watchRegistry(nc, () => {
    void server.sendToolListChanged().catch(() => {});
  });
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => (transport.onclose = resolve));
  await server.connect(transport);
  process.stderr.write(`mcp bridge ready: profile ${session.profile}\n`);
  await closed;
  stopWatching();
  dispatcher.close();
  client.close();
}
