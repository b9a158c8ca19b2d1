/**
 * `matrix-tool-registry/ai-sdk`: a session's tools as the Vercel AI SDK's `ToolSet`, for
 * `generateText({ tools })` / `streamText`. Each call runs through the session (its grant,
 * `system.dispatcher.$call`); a failed tool reaches the model as an `error-text` result with the
 * dispatcher's words, not a thrown error the SDK would reword. Strict where the schema allows.
 */
import { jsonSchema, type ToolSet, tool } from 'ai';
import type { ToolResult } from '../dispatcher/types.js';
import { argumentsOf } from '../oracle/tool-calls.js';
import type { ToolSession } from '../oracle/tool-session.js';
import type { ProviderFormat } from '../registry/types.js';
import { strictParameters } from './strict-parameters.js';

/** How the tools are made. */
export interface AiSdkToolsOptions {
  /** Strict mode where the schema allows (providers that support it then always send valid input); default true. */
  strict?: boolean;
}

/** The session's tools, keyed by name, as the AI SDK takes them. */
export function aiSdkTools<F extends ProviderFormat>(
  session: ToolSession<F>,
  options: AiSdkToolsOptions = {},
): ToolSet {
  const tools: ToolSet = {};
  for (const t of session.tools) {
    const parameters = strictParameters(t.inputSchema, options.strict !== false);
    tools[t.name] = tool({
      description: t.description,
      // No validation here: the dispatcher validates, and its violations are what the model reads.
      inputSchema: jsonSchema<unknown>(parameters.schema),
      strict: parameters.strict,
      execute: (input, { toolCallId, abortSignal }): Promise<ToolResult> =>
        session.call({ id: toolCallId, name: t.name, arguments: argumentsOf(input) }, { signal: abortSignal }),
      toModelOutput: ({ output }) =>
        output.isError ? { type: 'error-text', value: output.content } : { type: 'text', value: output.content },
    });
  }
  return tools;
}
