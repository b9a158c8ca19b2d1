/**
 * `matrix-tool-registry/langchain`: a session's tools as LangChain structured tools, for
 * `model.bindTools(tools)` and agents. Each call runs through the session (its grant,
 * `system.dispatcher.$call`) and answers a `ToolMessage` with the dispatcher's `content`, a
 * failed tool's with `status: "error"`. Input that LangChain's own schema check refuses is still
 * sent to the dispatcher, so the model reads the dispatcher's violations (every one, with its
 * path), not "Received tool input did not match expected schema".
 */
import type { CallbackManagerForToolRun } from '@langchain/core/callbacks/manager';
import { ToolMessage } from '@langchain/core/messages';
import { StructuredTool, ToolInputParsingException, type ToolRunnableConfig } from '@langchain/core/tools';
import type { ToolResult } from '../dispatcher/types.js';
import { argumentsOf } from '../oracle/tool-calls.js';
import type { ToolSession } from '../oracle/tool-session.js';
import type { JsonSchemaObject, ProviderFormat, ResolvedTool } from '../registry/types.js';

/** The session's tools as LangChain takes them. */
export function langChainTools<F extends ProviderFormat>(session: ToolSession<F>): MatrixStructuredTool[] {
  return session.tools.map((t) => new MatrixStructuredTool(session, t));
}

/** A LangChain tool call as `invoke` may get it. */
interface LangChainToolCall {
  id?: string;
  name: string;
  args: unknown;
  type?: 'tool_call';
}

/** What `StructuredTool.call` takes: the arguments, or a tool call carrying them. */
type CallInput = Parameters<StructuredTool<JsonSchemaObject>['call']>[0];

/** One session tool as a LangChain `StructuredTool` whose schema is the tool's JSON Schema. */
export class MatrixStructuredTool extends StructuredTool<JsonSchemaObject> {
  name: string;
  description: string;
  schema: JsonSchemaObject;

  constructor(
    private readonly session: Pick<ToolSession<ProviderFormat>, 'call'>,
    tool: ResolvedTool,
  ) {
    super();
    this.name = tool.name;
    this.description = tool.description;
    this.schema = tool.inputSchema;
  }

  /**
   * LangChain's schema check first, as every tool has it; what it refuses goes to the dispatcher,
   * whose words the model reads.
   */
  override async call(arg: CallInput, configArg?: ToolRunnableConfig, tags?: string[]): Promise<ToolMessage | string> {
    try {
      return await super.call(arg, configArg, tags);
    } catch (err) {
      if (!(err instanceof ToolInputParsingException)) throw err;
      const toolCall = isToolCall(arg) ? arg : configArg?.toolCall;
      const input = isToolCall(arg) ? arg.args : arg;
      return this.message(await this.run(input, toolCall?.id, configArg?.signal), toolCall?.id);
    }
  }

  protected async _call(
    arg: unknown,
    _runManager?: CallbackManagerForToolRun,
    config?: ToolRunnableConfig,
  ): Promise<ToolMessage | string> {
    const id = config?.toolCall?.id;
    return this.message(await this.run(arg, id, config?.signal), id);
  }

  private run(input: unknown, id: string | undefined, signal: AbortSignal | undefined): Promise<ToolResult> {
    const call = { id: id ?? `langchain-${this.name}`, name: this.name, arguments: argumentsOf(input) };
    return this.session.call(call, { signal });
  }

  /** A `ToolMessage` when the call came as a tool call (its id known), else the content alone. */
  private message(result: ToolResult, toolCallId: string | undefined): ToolMessage | string {
    if (toolCallId === undefined) return result.content;
    return new ToolMessage({
      content: result.content,
      tool_call_id: toolCallId,
      name: this.name,
      status: result.isError ? 'error' : 'success',
    });
  }
}

function isToolCall(value: unknown): value is LangChainToolCall {
  return value !== null && typeof value === 'object' && 'args' in value && 'name' in value;
}
