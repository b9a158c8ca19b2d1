/**
 * `mcp --profile P`: the tools of a resolved context, served over MCP on stdio, so Claude,
 * Cursor or any MCP client can use the bus tools. `tools/list` comes from `$resolve` (MCP
 * format), `tools/call` goes through `system.dispatcher.$call` (all an agent may reach; with its
 * grant in `Matrix-Grant` when it has one), and a registry change sends
 * `notifications/tools/list_changed`. Stdout is the MCP channel: logs go to stderr.
 */

import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, type CallToolResult, ListToolsRequestSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient } from '../bus/client.js';
import type { CallContext } from '../bus/context.js';
import { Mounts } from '../bus/subjects.js';
import type { ToolResult } from '../dispatcher/types.js';
import { watchRegistry } from '../registry/events.js';
import { REGISTRY_VERSION } from '../registry/mount.js';
import type { ResolvedToolContext, ResolveRequest } from '../registry/types.js';

/** Serves `session`'s tools over MCP stdio until the client disconnects. */
export async function serveMcp(nc: NatsConnection, session: ResolveRequest, ctx: CallContext = {}): Promise<void> {
  const request: ResolveRequest = { ...session, format: 'mcp' };
  const client = new BusClient(nc, { timeoutMs: 10_000 });
  const server = new Server({ name: 'matrix-tools', version: REGISTRY_VERSION }, { capabilities: { tools: { listChanged: true } } });

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const resolved = await client.request<ResolvedToolContext>(Mounts.Tools, '$resolve', request, ctx);
    return { tools: (resolved.providerTools ?? []) as Tool[] };
  });
  server.setRequestHandler(CallToolRequestSchema, async (req, extra): Promise<CallToolResult> => {
    const call = { id: String(extra.requestId), name: req.params.name, arguments: req.params.arguments ?? {} };
    // As long as the dispatcher may wait for an approver (60 s), and a little more.
    const result = await client.request<ToolResult>(Mounts.Dispatcher, '$call', { session: request, call }, { ...ctx, timeoutMs: 65_000 });
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
  client.close();
}
