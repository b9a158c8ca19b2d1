/**
 * Deferred loading (PROTOCOL 13): past a session's threshold, `$resolve` in the `anthropic` and
 * `openai` formats marks every tool but the kept ones `defer_loading: true` and adds the search
 * tool, a projection to `system.tools.$search` that the dispatcher runs like any tool (the
 * session passed along, so the search stays within its grant).
 */
import { Mounts } from '../../bus/subjects.js';
import type {
  AnthropicTool,
  AnthropicToolReference,
  OpenAIFunctionTool,
  OpenAIToolSearchOutput,
  OpenAIToolSearchTool,
  ProviderTool,
} from '../provider-tools.js';
import { type Diagnostic, ProviderFormat, type ResolvedTool, type ResolveRequest } from '../types.js';

/** The search tool's name, reserved like the built-ins' (PROTOCOL 6.2). */
export const SEARCH_TOOL_NAME = 'tool_search';
/** The op the search tool calls. */
export const SEARCH_OP = '$search';
/** Tools a session may have before the provider formats defer them, by default. */
export const DEFAULT_DEFER_THRESHOLD = 30;
/** Tools a search returns by default. */
export const DEFAULT_SEARCH_LIMIT = 5;
/** Most tools a search returns. */
export const MAX_SEARCH_LIMIT = 50;

/** What deferral does with a session's tools (`$resolve`'s `defer`). */
export interface DeferOptions {
  /** Tools loaded whatever the count. */
  keep?: string[];
  /** Defer only past this many tools; default 30. */
  threshold?: number;
}

const DESCRIPTION =
  'Search the tools you may use but have not loaded yet, by what you need done (for example "create a GitHub issue" or "read a file"). Returns the best matches; each becomes callable at once.';

const PARAMETERS = {
  type: 'object',
  additionalProperties: false,
  required: ['query'],
  properties: {
    query: { type: 'string', minLength: 1, maxLength: 1024, description: 'What you need a tool for, in words.' },
    limit: {
      type: 'integer',
      minimum: 1,
      maximum: MAX_SEARCH_LIMIT,
      description: `How many tools to return; default ${DEFAULT_SEARCH_LIMIT}.`,
    },
  },
} as const;

/** The search tool as the dispatcher runs it: `system.tools.$search`, read-only, never gated. */
export const SEARCH_TOOL: ResolvedTool = Object.freeze({
  name: SEARCH_TOOL_NAME,
  description: DESCRIPTION,
  inputSchema: PARAMETERS,
  target: Mounts.Tools,
  op: SEARCH_OP,
  resultMode: 'json',
  annotations: { readOnly: true, idempotent: true, openWorld: false },
  requiresApproval: false,
  context: Mounts.Tools,
}) as ResolvedTool;

/** Whether `$resolve` defers this session's `count` tools. */
export function defers(request: ResolveRequest, count: number): boolean {
  const { defer, format } = request;
  if (defer === undefined || (format !== ProviderFormat.Anthropic && format !== ProviderFormat.OpenAI)) return false;
  return count > (defer.threshold ?? DEFAULT_DEFER_THRESHOLD);
}

/**
 * The provider tools with all but the kept ones deferred, and the search tool last (never
 * deferred); a diagnostic says how many were deferred, and one names kept tools the session lacks.
 */
export function deferredTools(
  rendered: readonly ProviderTool[],
  format: typeof ProviderFormat.Anthropic | typeof ProviderFormat.OpenAI,
  defer: DeferOptions,
  diagnostics: Diagnostic[],
): ProviderTool[] {
  const keep = new Set(defer.keep ?? []);
  const out: ProviderTool[] = [];
  let deferred = 0;
  for (const tool of rendered) {
    const name = providerToolName(tool);
    if (name !== undefined && keep.delete(name)) out.push(tool);
    else {
      out.push({ ...tool, defer_loading: true } as ProviderTool);
      deferred++;
    }
  }
  out.push(format === ProviderFormat.Anthropic ? anthropicSearchTool() : openAISearchTool());
  diagnostics.push({
    level: 'info',
    code: 'tools_deferred',
    message: `${deferred} of ${rendered.length} tools deferred: ${SEARCH_TOOL_NAME} finds and loads them`,
  });
  if (keep.size > 0) {
    diagnostics.push({
      level: 'warning',
      code: 'defer_keep_unknown',
      message: `defer.keep names tools this session does not have: ${[...keep].sort().join(', ').slice(0, 500)}`,
    });
  }
  return out;
}

function providerToolName(tool: ProviderTool): string | undefined {
  if ('function' in tool) return tool.function.name;
  return 'name' in tool ? tool.name : undefined;
}

function anthropicSearchTool(): AnthropicTool {
  return { name: SEARCH_TOOL_NAME, description: DESCRIPTION, input_schema: structuredClone(PARAMETERS) as never };
}

function openAISearchTool(): OpenAIToolSearchTool {
  return {
    type: 'tool_search',
    execution: 'client',
    description: DESCRIPTION,
    parameters: structuredClone(PARAMETERS) as never,
  };
}

/** Anthropic's answer to a search: one `tool_reference` block per tool found, best first. */
export function toolReferences(names: readonly string[]): AnthropicToolReference[] {
  return names.map((tool_name) => ({ type: 'tool_reference', tool_name }));
}

/** OpenAI's answer to a search: the found tools' definitions, not deferred. */
export function toolSearchOutput(tools: OpenAIFunctionTool[]): OpenAIToolSearchOutput {
  return { type: 'tool_search_output', execution: 'client', status: 'completed', tools };
}
