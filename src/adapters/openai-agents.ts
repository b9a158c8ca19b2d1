/**
 * `matrix-tool-registry/openai-agents`: a session's tools as OpenAI Agents SDK `FunctionTool`s,
 * for `new Agent({ tools })`. Each call runs through the session (its grant,
 * `system.dispatcher.$call`); what the model reads back is the dispatcher's `content`, a failed
 * tool's words included, never the SDK's generic error text. Strict where the schema allows.
 */
import { type FunctionTool, tool } from '@openai/agents';
import { argumentsOf } from '../oracle/tool-calls.js';
import type { ToolSession } from '../oracle/tool-session.js';
import type { JsonSchemaObject, ProviderFormat } from '../registry/types.js';
import { strictParameters } from './strict-parameters.js';

/** How the tools are made. */
export interface AgentsToolsOptions {
  /** Strict mode where the schema allows; default true. */
  strict?: boolean;
}

/** The session's tools as the Agents SDK takes them. */
export function agentsTools<F extends ProviderFormat>(
  session: ToolSession<F>,
  options: AgentsToolsOptions = {},
): FunctionTool<unknown, ObjectParameters, string>[] {
  return session.tools.map((t) => {
    const offered = strictParameters(t.inputSchema, options.strict !== false);
    const run = async (input: unknown, callId: string | undefined, signal: AbortSignal | undefined) => {
      const call = { id: callId ?? `agents-${t.name}`, name: t.name, arguments: argumentsOf(input) };
      return (await session.call(call, { signal })).content;
    };
    // A call that could not be made at all (the bus is gone): the error's own words, not the SDK's default.
    const errorFunction = (_context: unknown, error: unknown) =>
      `"${t.name}" could not be run: ${error instanceof Error ? error.message : String(error)}`;
    if (offered.strict)
      return tool({
        name: t.name,
        description: t.description,
        parameters: closedObject(offered.schema),
        strict: true,
        execute: (input, _context, details) => run(input, details?.toolCall?.callId, details?.signal),
        errorFunction,
      });
    return tool({
      name: t.name,
      description: t.description,
      parameters: openObject(t.inputSchema),
      strict: false,
      execute: (input, _context, details) => run(input, details?.toolCall?.callId, details?.signal),
      errorFunction,
    });
  });
}

/** A JSON Schema object's properties, as the Agents SDK types them. */
type Properties = Record<string, Record<string, unknown>>;

/** The parameters type of the tools this adapter makes (a closed or an open JSON Schema object). */
export type ObjectParameters = ReturnType<typeof closedObject> | ReturnType<typeof openObject>;

/** A strict-mode schema (every object closed, every property required) in the SDK's strict type. */
function closedObject(schema: JsonSchemaObject) {
  const { properties, required } = partsOf(schema);
  return Object.assign({}, schema, {
    type: 'object' as const,
    properties,
    required,
    additionalProperties: false as const,
  });
}

/**
 * Any other object schema in the SDK's non-strict type, which has room for open objects only:
 * one that closes itself is offered open, and the dispatcher, which validates against the tool's
 * own schema, tells the model which property it does not take.
 */
function openObject(schema: JsonSchemaObject) {
  const { properties, required } = partsOf(schema);
  return Object.assign({}, schema, {
    type: 'object' as const,
    properties,
    required,
    additionalProperties: true as const,
  });
}

function partsOf(schema: JsonSchemaObject): { properties: Properties; required: string[] } {
  const properties: Properties = {};
  const given = schema.properties;
  if (given !== null && typeof given === 'object')
    for (const [name, value] of Object.entries(given))
      if (value !== null && typeof value === 'object') properties[name] = { ...value };
  const required = Array.isArray(schema.required) ? schema.required.filter((r) => typeof r === 'string') : [];
  return { properties, required };
}
