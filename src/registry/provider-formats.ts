/**
 * Renders resolved tools in each LLM provider's own tool format: OpenAI function tools,
 * Anthropic tools, MCP `Tool`s. SDK tools are the worker's own and are not rendered.
 */
import { firstAndMore } from '../bus/schema-compiler.js';
import type {
  AnthropicTool,
  McpTool,
  McpToolAnnotations,
  OpenAIFunctionTool,
  ProviderTool,
  ProviderToolsByFormat,
} from './provider-tools.js';
import { toStrictSchema } from './strict.js';
import { type Diagnostic, type ProviderFormat, type ResolvedTool, TaskSupport } from './types.js';

/** Renders tools in one format; `strict` and `diagnostics` matter to OpenAI's only. */
type Renderer<F extends ProviderFormat> = (
  tools: readonly ResolvedTool[],
  strict: boolean,
  diagnostics: Diagnostic[],
) => ProviderToolsByFormat[F];

/** The renderer of each format, keyed so that `renderers[format]` returns that format's own type. */
const renderers: { [F in ProviderFormat]: Renderer<F> } = {
  matrix: () => undefined,
  openai: (tools, strict, diagnostics) => tools.map((t) => openAIFunctionTool(t, strict, diagnostics)),
  anthropic: (tools) => tools.map(anthropicTool),
  mcp: (tools) => tools.map(mcpTool),
};

/**
 * The tools in `format`, typed as that format's, or undefined for `matrix` (the projections
 * are the format). With `strict`, OpenAI tools get strict-mode parameters; each loss is
 * reported in `diagnostics`.
 */
export function providerToolsOf<F extends ProviderFormat>(
  tools: readonly ResolvedTool[],
  format: F,
  strict = false,
  diagnostics: Diagnostic[] = [],
): ProviderToolsByFormat[F] {
  return renderers[format](tools, strict, diagnostics);
}

/** The tools in `format`, or undefined for `matrix`: what `$resolve` puts in `providerTools`. */
export function renderProviderTools(
  tools: readonly ResolvedTool[],
  format: ProviderFormat,
  strict = false,
  diagnostics: Diagnostic[] = [],
): ProviderTool[] | undefined {
  return providerToolsOf(tools, format, strict, diagnostics);
}

function openAIFunctionTool(t: ResolvedTool, strict: boolean, diagnostics: Diagnostic[]): OpenAIFunctionTool {
  if (!strict)
    return { type: 'function', function: { name: t.name, description: t.description, parameters: t.inputSchema } };
  const made = toStrictSchema(t.inputSchema);
  if (!made.strict) {
    diagnostics.push({
      level: 'warning',
      code: 'strict_unavailable',
      message: `tool '${t.name}' is not strict: ${bounded(made.reason)}`,
      context: t.context,
      tool: t.name,
    });
    return {
      type: 'function',
      function: { name: t.name, description: t.description, parameters: t.inputSchema, strict: false },
    };
  }
  if (made.removed.length > 0) {
    diagnostics.push({
      level: 'info',
      code: 'strict_removed',
      message: `tool '${t.name}': strict mode does not support ${listed(made.removed)}; removed`,
      context: t.context,
      tool: t.name,
    });
  }
  return {
    type: 'function',
    function: { name: t.name, description: t.description, parameters: made.schema, strict: true },
  };
}

function anthropicTool(t: ResolvedTool): AnthropicTool {
  return { name: t.name, description: t.description, input_schema: t.inputSchema };
}

function mcpTool(t: ResolvedTool): McpTool {
  // MCP's own `execution`: every tool says it, `optional` where its projection does not.
  const execution = { taskSupport: t.execution?.taskSupport ?? TaskSupport.Optional };
  const tool: McpTool = { name: t.name, description: t.description, inputSchema: t.inputSchema, execution };
  // An MCP client checks a result's `structuredContent` against it: the bridge sends such a tool's
  // own structured result there (`callToolResultOf`), not the whole reply.
  if (t.outputSchema !== undefined) tool.outputSchema = t.outputSchema;
  const a = t.annotations;
  if (a !== undefined) {
    const annotations: McpToolAnnotations = {
      readOnlyHint: a.readOnly,
      destructiveHint: a.destructive,
      idempotentHint: a.idempotent,
      openWorldHint: a.openWorld,
    };
    tool.annotations = annotations;
  }
  return tool;
}

/** Most characters of what a diagnostic quotes from a schema: its paths grow with its depth. */
const MAX_QUOTED_CHARS = 500;
/** Most removed keywords a diagnostic names. */
const MAX_LISTED_PATHS = 10;

/** Text quoted from a schema, cut to `MAX_QUOTED_CHARS`: a diagnostic stays small however deep the schema. */
function bounded(text: string): string {
  return text.length > MAX_QUOTED_CHARS ? `${text.slice(0, MAX_QUOTED_CHARS - 3)}...` : text;
}

/** The first removed paths, and how many more. */
function listed(paths: readonly string[]): string {
  return firstAndMore(
    paths,
    MAX_LISTED_PATHS,
    (first) => bounded(first.join(', ')),
    (shown, left) => `${shown} and ${left} more`,
  );
}
