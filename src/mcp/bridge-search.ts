/**
 * The bridge's `search_tools` (PROTOCOL 13, MCP's progressive discovery), for both revisions:
 * past the session's threshold `tools/list` shows the kept tools and `search_tools`, a call of
 * it answers the found tools with their full definitions, and a found tool is called like any
 * other, listed or not (the dispatcher takes any tool of the session). At or below the threshold
 * `search_tools` is no tool of the bridge: a call of it goes to the dispatcher like any name.
 *
 * A search runs as the provider formats' does: a `system.dispatcher.$call` of `tool_search`, so
 * the dispatcher audits it like any call (who, which session, the query's digest, the outcome)
 * and sends `$search` the session under the caller's grant. The bridge runs as an agent and may
 * publish no audit event itself.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { type BusClient, newCallId } from '../bus/client.js';
import type { CallContext } from '../bus/context.js';
import { MatrixError } from '../bus/errors.js';
import { Mounts } from '../bus/subjects.js';
import type { ToolResult } from '../dispatcher/types.js';
import type { McpTool } from '../registry/provider-tools.js';
import { MCP_SEARCH_TOOL_NAME, mcpSearches } from '../registry/search/mcp-view.js';
import { type DeferOptions, SEARCH_OP, SEARCH_TOOL_NAME } from '../registry/search/search-tool.js';
import type { ResolveRequest, SearchReply } from '../registry/types.js';
import { callToolResultOf } from './bridge-tasks.js';

/** How long a search through the dispatcher may take, ms. */
const SEARCH_TIMEOUT_MS = 30_000;

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
 * The session the dispatcher runs a bridge search in: the bridge's, deferred in a provider
 * format, so that its resolution holds the `tool_search` tool (PROTOCOL 13; under a grant,
 * `format` and `defer` are the caller's to choose). The bridge has already found the session
 * past its own threshold: threshold 0 defers whatever the count.
 */
export function searchSession(session: ResolveRequest): ResolveRequest {
  return { ...session, format: 'anthropic', defer: { threshold: 0 } };
}

/**
 * Runs a `search_tools` call as the dispatcher's `tool_search` (audited, under the caller's grant
 * in `ctx`) and takes the found tools' full MCP definitions from `tools` (the session's, all of
 * them). A reply past the dispatcher's content cap comes back without `structured`: the same
 * search is then asked of `system.tools.$search` directly (the call is in the trail already).
 * A refused search (an empty query, a limit out of range) is the dispatcher's error result.
 */
export async function searchMcpTools(
  client: BusClient,
  session: ResolveRequest,
  args: { query: unknown; limit?: unknown },
  tools: readonly McpTool[],
  ctx: CallContext = {},
  callId: string = newCallId(),
): Promise<{ reply: SearchReply; found: McpTool[] } | { refused: ToolResult }> {
  const call = { id: callId, name: SEARCH_TOOL_NAME, arguments: args };
  const result = await client.request<ToolResult>(
    Mounts.Dispatcher,
    '$call',
    { session: searchSession(session), call },
    { ...ctx, callId, timeoutMs: SEARCH_TIMEOUT_MS },
  );
  if (result.isError) return { refused: result };
  const reply =
    (result.structured as SearchReply | undefined) ??
    (await client.request<SearchReply>(Mounts.Tools, SEARCH_OP, { session, ...args }, ctx));
  const byName = new Map(tools.map((t) => [t.name, t]));
  return { reply, found: reply.tools.flatMap((t) => byName.get(t.name) ?? []) };
}

/**
 * Answers a `search_tools` call with `searchMcpTools` for `session` under the caller's context
 * (its grant, so the search stays within it). Only `query` and `limit` of `args` are passed on;
 * a search the dispatcher refuses (an empty query, a limit out of range) is a tool error the
 * model can read, as a failed tool's is. `callId` is the call's id in the trail.
 */
export async function answerBridgeSearch(
  client: BusClient,
  session: ResolveRequest,
  ctx: CallContext,
  args: Record<string, unknown>,
  tools: readonly McpTool[],
  /** How a tool is shown in this revision (2026-07-28 tools carry no `execution`). */
  shown: (tool: McpTool) => Omit<McpTool, 'execution'> = (tool) => tool,
  callId?: string,
): Promise<CallToolResult> {
  const asked = args.limit === undefined ? { query: args.query } : { query: args.query, limit: args.limit };
  try {
    const searched = await searchMcpTools(client, session, asked, tools, ctx, callId);
    if ('refused' in searched) return callToolResultOf(searched.refused);
    const { reply, found } = searched;
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
