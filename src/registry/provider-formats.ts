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
        if (!strict) return { type: 'function', function: { name: t.name, description: t.description, parameters: t.inputSchema } };
        const made = toStrictSchema(t.inputSchema);
        if (!made.strict) {
          diagnostics.push({
            level: 'warning',
            code: 'strict_unavailable',
            message: `tool '${t.name}' is not strict: ${made.reason}`,
            context: t.context,
            tool: t.name,
          });
          return { type: 'function', function: { name: t.name, description: t.description, parameters: t.inputSchema, strict: false } };
        }
        if (made.removed.length > 0) {
          diagnostics.push({
            level: 'info',
            code: 'strict_removed',
            message: `tool '${t.name}': strict mode does not support ${made.removed.join(', ')}; removed`,
            context: t.context,
            tool: t.name,
          });
        }
        return { type: 'function', function: { name: t.name, description: t.description, parameters: made.schema, strict: true } };
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
        return tool;
      });
  }
}
