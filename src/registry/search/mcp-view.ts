/**
 * What the MCP bridge offers past a session's defer threshold (PROTOCOL 13, MCP's progressive
 * discovery): the kept tools and `search_tools`, whose call the bridge answers with
 * `system.tools.$search`, and a found tool's full definition on demand. Pure: the bridge owns
 * when to call these and how to send `tools/list_changed`.
 */

import type { BusClient } from '../../bus/client.js';
import type { CallContext } from '../../bus/context.js';
import { Mounts } from '../../bus/subjects.js';
import type { McpTool } from '../provider-tools.js';
import type { ResolveRequest, SearchReply } from '../types.js';
import { DEFAULT_DEFER_THRESHOLD, type DeferOptions, MAX_SEARCH_LIMIT, SEARCH_OP } from './search-tool.js';

/** The MCP search tool's name, as MCP's client guidance calls it. */
export const MCP_SEARCH_TOOL_NAME = 'search_tools';

/** The MCP search tool: `{query, limit?}` → the best tools' names and descriptions. */
export const MCP_SEARCH_TOOL: McpTool = {
  name: MCP_SEARCH_TOOL_NAME,
  description:
    'Search the tools of this session that are not listed, by what you need done. Returns the best matches with their full definitions; call them by name.',
  inputSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['query'],
    properties: {
      query: { type: 'string', minLength: 1, maxLength: 1024, description: 'What you need a tool for, in words.' },
      limit: { type: 'integer', minimum: 1, maximum: MAX_SEARCH_LIMIT, description: 'How many tools; default 5.' },
    },
  },
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  execution: { taskSupport: 'forbidden' },
};

/** Whether a session of `count` tools is past the threshold: MCP clients then get `search_tools`. */
export function mcpSearches(count: number, defer: DeferOptions = {}): boolean {
  return count > (defer.threshold ?? DEFAULT_DEFER_THRESHOLD);
}

/**
 * The tools an MCP client lists for a session: all of them at or below the threshold (nothing
 * changes); past it, the `keep` tools in their order and `search_tools` last.
 */
export function mcpListedTools(tools: readonly McpTool[], defer: DeferOptions = {}): McpTool[] {
  if (!mcpSearches(tools.length, defer)) return [...tools];
  const keep = new Set(defer.keep ?? []);
  return [...tools.filter((t) => keep.has(t.name)), MCP_SEARCH_TOOL];
}

/**
 * Runs a `search_tools` call: `system.tools.$search` for the session (under the caller's grant,
 * in `ctx`), and the found tools' full MCP definitions from `tools` (the session's, all of them).
 */
export async function searchMcpTools(
  client: BusClient,
  session: ResolveRequest,
  args: { query: string; limit?: number },
  tools: readonly McpTool[],
  ctx: CallContext = {},
): Promise<{ reply: SearchReply; found: McpTool[] }> {
  const body = args.limit === undefined ? { session, query: args.query } : { session, ...args };
  const reply = await client.request<SearchReply>(Mounts.Tools, SEARCH_OP, body, ctx);
  const byName = new Map(tools.map((t) => [t.name, t]));
  return { reply, found: reply.tools.flatMap((t) => byName.get(t.name) ?? []) };
}
