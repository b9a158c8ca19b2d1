/**
 * What the MCP bridge offers past a session's defer threshold (PROTOCOL 13, MCP's progressive
 * discovery): the kept tools and `search_tools`, whose call the bridge answers through the
 * dispatcher's `tool_search` (src/mcp/bridge-search.ts), and a found tool's full definition on
 * demand. Pure: the bridge owns when to call these and how to send `tools/list_changed`.
 */

import type { McpTool } from '../provider-tools.js';
import { DEFAULT_DEFER_THRESHOLD, type DeferOptions, MAX_SEARCH_LIMIT } from './search-tool.js';

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
