/**
 * Renders resolved tools in each LLM provider's own tool format: OpenAI function tools,
 * Anthropic tools, MCP `Tool`s. SDK tools are the worker's own and are not rendered.
 */
import { ProviderFormat, type ResolvedTool } from './types.js';

/** The tools in `format`, or undefined for `matrix` (the projections are the format). */
export function renderProviderTools(
  tools: readonly ResolvedTool[],
  format: ProviderFormat,
): Record<string, unknown>[] | undefined {
  switch (format) {
    case ProviderFormat.Matrix:
      return undefined;
    case ProviderFormat.OpenAI:
      return tools.map((t) => ({
        type: 'function',
        function: { name: t.name, description: t.description, parameters: t.inputSchema },
      }));
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
