/**
 * The MCP bridge's result for a tool listed with an `outputSchema`: the client checks
 * `structuredContent` against that schema, so the bridge sends the server's own structured
 * result (and content blocks) from a host mount's `CallToolResult`, a mount's own object reply as
 * it is, and a failed result saying why when there is none to send, never the whole reply.
 */
import { describe, expect, it } from 'vitest';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { callToolResultOf, withOutputSchemas } from '../../src/mcp/bridge-tasks.js';

const result = (structured: unknown, more: Partial<ToolResult> = {}): ToolResult => ({
  callId: 'c1',
  name: 'weather',
  isError: false,
  content: JSON.stringify(structured) ?? '',
  durationMs: 1,
  ...(structured === undefined ? {} : { structured }),
  ...more,
});
const weather = { temperature: 36, conditions: 'drizzle' };
const hosted = {
  content: [{ type: 'text', text: JSON.stringify(weather) }],
  structuredContent: weather,
  isError: false,
};

describe('the MCP result of a tool with an outputSchema', () => {
  it("sends a hosted server's own structuredContent and content blocks", () => {
    expect(callToolResultOf(result(hosted), true)).toEqual({
      content: hosted.content,
      structuredContent: weather,
      isError: false,
    });
  });

  it("sends a mount's own object reply as the structured content", () => {
    expect(callToolResultOf(result(weather), true).structuredContent).toEqual(weather);
  });

  it('fails a result with no structured content to send, saying why', () => {
    const cut = callToolResultOf(
      result(undefined, { content: '{"temperature": 3', truncated: { shown: 17, total: 90_000 } }),
      true,
    );
    expect(cut.isError).toBe(true);
    expect(cut.structuredContent).toBeUndefined();
    expect(cut.content).toEqual([
      {
        type: 'text',
        text: 'Error (no_structured_content): "weather" declares an outputSchema, but its result (90000 characters) passed the cap of 17: {"temperature": 3',
      },
    ]);
    const none = callToolResultOf(result({ content: [{ type: 'text', text: 'no structure' }], isError: false }), true);
    expect(none.isError).toBe(true);
    expect((none.content[0] as { text: string }).text).toContain('its result has none');
  });

  it('keeps the usual result without an outputSchema, and for a failed call', () => {
    expect(callToolResultOf(result(hosted)).structuredContent).toEqual(hosted);
    const failed = callToolResultOf(
      result(undefined, { isError: true, content: 'gone', error: { code: 'unavailable', message: 'gone' } }),
      true,
    );
    expect(failed).toEqual({ content: [{ type: 'text', text: 'Error (unavailable): gone' }], isError: true });
  });

  it('knows the listed tools with an outputSchema', () => {
    expect(withOutputSchemas([{ name: 'a', outputSchema: { type: 'object' } }, { name: 'b' }])).toEqual(new Set(['a']));
  });
});
