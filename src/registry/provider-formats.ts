/**
 * Renders resolved tools in each LLM provider's own tool format: OpenAI function tools,
 * Anthropic tools, MCP `Tool`s. SDK tools are the worker's own and are not rendered.
 */
import { toStrictSchema } from './strict.js';
import { type Diagnostic, ProviderFormat, type ResolvedTool } from './types.js';

/**
 * The tools in `format`, or undefined for `matrix` (the projections are the format). With
 * `strict`, OpenAI tools get strict-mode parameters; each loss is reported in `diagnostics`.
 */
export function renderProviderTools(
  tools: readonly ResolvedTool[],
  format: ProviderFormat,
  strict = false,
  diagnostics: Diagnostic[] = [],
): Record<string, unknown>[] | undefined {
  switch (format) {
    case ProviderFormat.Matrix:
      return undefined;
    case ProviderFormat.OpenAI:
      return tools.map((t) => {
        if (!strict)
          return {
            type: 'function',
            function: { name: t.name, description: t.description, parameters: t.inputSchema },
          };
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
      });
    case ProviderFormat.Anthropic:
      return tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.inputSchema }));
    case ProviderFormat.Mcp:
      return tools.map((t) => {
        const tool: Record<string, unknown> = { name: t.name, description: t.description, inputSchema: t.inputSchema };
        const a = t.annotations;
        if (a !== undefined) {
          tool.annotations = {
            readOnlyHint: a.readOnly,
            destructiveHint: a.destructive,
            idempotentHint: a.idempotent,
            openWorldHint: a.openWorld,
          };
        }
        // MCP's own field: every tool says it, `optional` when its projection does not.
        tool.execution = { taskSupport: t.execution?.taskSupport ?? 'optional' };
        return tool;
      });
  }
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
  const shown = bounded(paths.slice(0, MAX_LISTED_PATHS).join(', '));
  return paths.length > MAX_LISTED_PATHS ? `${shown} and ${paths.length - MAX_LISTED_PATHS} more` : shown;
}
