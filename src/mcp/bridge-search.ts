/**
 * The bridge's `search_tools` (PROTOCOL 13, MCP's progressive discovery), for both revisions:
 * past the session's threshold `tools/list` shows the kept tools and `search_tools`, a call of
 * it answers the found tools with their full definitions, and a found tool is called like any
 * other, listed or not (the dispatcher takes any tool of the session). At or below the threshold
 * `search_tools` is no tool of the bridge: a call of it goes to the dispatcher like any name.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { BusClient } from '../bus/client.js';
import type { CallContext } from '../bus/context.js';
import { MatrixError } from '../bus/errors.js';
import type { McpTool } from '../registry/provider-tools.js';
import { MCP_SEARCH_TOOL_NAME, mcpSearches, searchMcpTools } from '../registry/search/mcp-view.js';
import type { DeferOptions } from '../registry/search/search-tool.js';
import type { ResolveRequest } from '../registry/types.js';

/** What a `search_tools` result carries, as `structuredContent` and as its text. */
export interface FoundTools {
  /** The found tools' full MCP definitions, best first: each is callable by its name. */
  tools: Array<Omit<McpTool, 'execution'>>;
  /** How many of the session's tools matched the query at all. */
  total: number;
}

/** Whether a `tools/call` of `name` is the bridge's search: `search_tools` in a session past its threshold. */
export function callsBridgeSearch(name: string, tools: readonly McpTool[], search: DeferOptions): boolean {
  return name === MCP_SEARCH_TOOL_NAME && mcpSearches(tools.length, search);
}

/**
 * Answers a `search_tools` call with `system.tools.$search` for `session` under the caller's
 * context (its grant, so the search stays within it). Only `query` and `limit` of `args` are
 * passed on; a search the registry refuses (an empty query, a limit out of range) is a tool
 * error the model can read, as a failed tool's is.
 */
export async function answerBridgeSearch(
  client: BusClient,
  session: ResolveRequest,
  ctx: CallContext,
  args: Record<string, unknown>,
  tools: readonly McpTool[],
  /** How a tool is shown in this revision (2026-07-28 tools carry no `execution`). */
  shown: (tool: McpTool) => Omit<McpTool, 'execution'> = (tool) => tool,
): Promise<CallToolResult> {
  const asked = (args.limit === undefined ? { query: args.query } : { query: args.query, limit: args.limit }) as {
    query: string;
    limit?: number;
  };
  try {
    const { reply, found } = await searchMcpTools(client, session, asked, tools, ctx);
    const structured: FoundTools = { tools: found.map(shown), total: reply.total };
    return {
      content: [{ type: 'text', text: JSON.stringify(structured) }],
      structuredContent: structured as unknown as Record<string, unknown>,
    };
  } catch (err) {
    const text =
      err instanceof MatrixError ? `Error (${err.code}): ${err.message}` : `Error (search_failed): ${String(err)}`;
    return { content: [{ type: 'text', text }], isError: true };
  }
}
