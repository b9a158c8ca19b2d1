/**
 * What the MCP bridge reads from stdin, before the SDK's stdio transport does. That transport
 * drops, without a word, a line that is not JSON or not a JSON-RPC message (a `tools/call`
 * whose params are a string: -32602 here), and a client waits for an answer that never comes.
 * JSON-RPC 2.0 says such lines are answered: here they are, and only well-formed lines go on to
 * the SDK.
 */
import { Transform } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { JSONRPCMessageSchema, ErrorCode as JsonRpcError } from '@modelcontextprotocol/sdk/types.js';
import { jsonShapeViolation, REQUEST_SHAPE } from '../bus/codec.js';

/** A JSON-RPC error response. */
export interface JsonRpcErrorResponse {
  jsonrpc: '2.0';
  id: string | number | null;
  error: { code: number; message: string };
}

/** How deep a message may nest: the bus's own bound on a request (PROTOCOL 2), judged before it is parsed. */
const MESSAGE_SHAPE = REQUEST_SHAPE;

/** The answer to a line the SDK would drop, or undefined for a line it reads. */
export function malformedLine(line: string): JsonRpcErrorResponse | undefined {
  const tooLarge = oversizedText(line);
  if (tooLarge !== undefined) return tooLarge;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return failure(null, JsonRpcError.ParseError, 'Parse error: a line must hold one JSON-RPC message in JSON');
  }
  return malformedMessage(value);
}

/**
 * Why JSON text is refused before it is parsed (it nests deeper than 64 levels, or holds more
 * maps' entries, array items or values than a bus request may), or undefined: parsing a body
 * built to be deep costs the time to reach its first excess, not the time to parse it.
 */
export function oversizedText(text: string): JsonRpcErrorResponse | undefined {
  const violation = jsonShapeViolation(text, MESSAGE_SHAPE);
  if (violation === undefined) return undefined;
  return failure(null, JsonRpcError.InvalidRequest, `Invalid Request: the message ${violation.message}`);
}

/** The answer to a parsed message the SDK would drop or answer with its zod dump, or undefined for one it reads. */
export function malformedMessage(value: unknown): JsonRpcErrorResponse | undefined {
  if (JSONRPCMessageSchema.safeParse(value).success) return undefined;
  const message =
    value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  const id = typeof message.id === 'string' || typeof message.id === 'number' ? message.id : null;
  if (
    typeof message.method === 'string' &&
    'params' in message &&
    (message.params === null || typeof message.params !== 'object')
  ) {
    return failure(
      id,
      JsonRpcError.InvalidParams,
      `${message.method} params must be an object, got ${message.params === null ? 'null' : typeof message.params}`,
    );
  }
  return failure(
    id,
    JsonRpcError.InvalidRequest,
    'Invalid Request: not a JSON-RPC 2.0 request, notification or response',
  );
}

function failure(id: string | number | null, code: number, message: string): JsonRpcErrorResponse {
  return { jsonrpc: '2.0', id, error: { code, message } };
}

/**
 * Stdin, line by line, for the SDK's transport: `answer` gets the response to each malformed line,
 * which goes no further.
 */
export function wellFormedLines(answer: (response: JsonRpcErrorResponse) => void): Transform {
  const decoder = new StringDecoder('utf8');
  let pending = '';
  const pass = (stream: Transform, line: string) => {
    if (line.trim() === '') return;
    const malformed = malformedLine(line);
    if (malformed === undefined) stream.push(`${line}\n`);
    else answer(malformed);
  };
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      pending += decoder.write(chunk);
      for (let end = pending.indexOf('\n'); end >= 0; end = pending.indexOf('\n')) {
        pass(this, pending.slice(0, end).replace(/\r$/, ''));
        pending = pending.slice(end + 1);
      }
      done();
    },
    flush(done) {
      pass(this, pending + decoder.end());
      done();
    },
  });
}
