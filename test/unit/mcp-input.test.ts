import { describe, expect, it } from 'vitest';
import { type JsonRpcErrorResponse, malformedLine, wellFormedLines } from '../../src/mcp/input.js';

describe('the MCP bridge input: lines the SDK would drop are answered', () => {
  it('lets JSON-RPC messages through and answers the rest as JSON-RPC 2.0 says', () => {
    expect(malformedLine('{"jsonrpc":"2.0","id":1,"method":"tools/list"}')).toBeUndefined();
    expect(malformedLine('{"jsonrpc":"2.0","method":"notifications/initialized"}')).toBeUndefined();
    expect(malformedLine('{"jsonrpc":"2.0","id":3,"result":{}}')).toBeUndefined();
    expect(malformedLine('{oops')).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32700, message: expect.stringContaining('Parse error') },
    });
    expect(malformedLine('{"jsonrpc":"2.0","id":"c","method":"tools/call","params":"x"}')).toEqual({
      jsonrpc: '2.0',
      id: 'c',
      error: { code: -32602, message: 'tools/call params must be an object, got string' },
    });
    expect(malformedLine('[1]')?.error.code).toBe(-32600);
    expect(malformedLine('{"id":4,"method":"tools/list"}')).toMatchObject({ id: 4, error: { code: -32600 } });
  });

  it('splits chunks into lines, whatever the chunk boundaries, and keeps a last line without a newline', async () => {
    const answered: JsonRpcErrorResponse[] = [];
    const stream = wellFormedLines((r) => answered.push(r));
    const out: string[] = [];
    stream.on('data', (d: Buffer) => out.push(d.toString()));
    const text =
      '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"q":"é"}}\n{bad\n\n{"jsonrpc":"2.0","id":2,"method":"ping"}';
    const bytes = Buffer.from(text);
    for (let i = 0; i < bytes.length; i += 7) stream.write(bytes.subarray(i, i + 7));
    stream.end();
    await new Promise((resolve) => stream.on('end', resolve));
    expect(out.join('')).toBe(
      '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"q":"é"}}\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n',
    );
    expect(answered.map((a) => a.error.code)).toEqual([-32700]);
  });
});
