/**
 * The body of a POST to the HTTP bridge, read and checked before the bridge spends anything on
 * it: its shape before it is parsed, each message as over stdio, and a new session's first POST
 * must be `initialize` before its grant's tools are resolved or anything subscribed. The body
 * goes on to the SDK's transport already parsed.
 */
import type { IncomingMessage } from 'node:http';
import { isInitializeRequest, ErrorCode as JsonRpcError } from '@modelcontextprotocol/sdk/types.js';
import { type JsonRpcErrorResponse, malformedMessage, oversizedText } from './input.js';

/** Most bytes of one POST body: the SDK transport's own bound, 4 MiB. */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;
/** Longest wait for a whole body, in ms: a client that never sends it holds its socket no longer. */
export const BODY_TIMEOUT_MS = 10_000;

/** A body read and parsed, or the HTTP status and JSON-RPC error that refuse it. */
export type PostBody =
  | { ok: true; message: unknown }
  | { ok: false; status: number; error: JsonRpcErrorResponse }
  /** The client went away (or its time to send the body ran out) before the body was whole. */
  | { ok: false; status: 0; error?: undefined };

/**
 * Reads the whole body (at most `MAX_BODY_BYTES`, within `BODY_TIMEOUT_MS`, else the socket is
 * closed), checks and parses it.
 */
export function readPostBody(req: IncomingMessage): Promise<PostBody> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) return Promise.resolve(tooLarge());
  return new Promise<PostBody>((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (body: PostBody) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      resolve(body);
    };
    const deadline = setTimeout(() => {
      settle({ ok: false, status: 0 });
      req.destroy();
    }, BODY_TIMEOUT_MS).unref();
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        req.removeAllListeners('data');
        req.resume();
        settle(tooLarge());
      } else chunks.push(chunk);
    });
    req.once('end', () => settle(parsed(Buffer.concat(chunks).toString('utf8'))));
    req.once('close', () => settle({ ok: false, status: 0 }));
    req.once('error', () => settle({ ok: false, status: 0 }));
  });
}

/** Why `message` cannot open a session (it is not one `initialize` request), or undefined. */
export function notInitialize(message: unknown): PostBody | undefined {
  if (isInitializeRequest(message)) return undefined;
  return refusal(
    400,
    JsonRpcError.InvalidRequest,
    'Invalid Request: a new MCP session starts with one initialize request (no Mcp-Session-Id was sent)',
    idOf(message),
  );
}

/**
 * The body's messages, checked as the stdio bridge checks a line (src/mcp/input.ts): its
 * shape before it is parsed, then each message, a batch's too; what the SDK would answer with a
 * "Parse error" or its zod dump is `400` with `-32602` or `-32600` and the request's id.
 */
function parsed(text: string): PostBody {
  const oversized = oversizedText(text);
  if (oversized !== undefined) return { ok: false, status: 400, error: oversized };
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return refusal(400, JsonRpcError.ParseError, 'Parse error: the body must hold JSON-RPC messages in JSON', null);
  }
  for (const each of Array.isArray(message) ? message : [message]) {
    const malformed = malformedMessage(each);
    if (malformed !== undefined) return { ok: false, status: 400, error: malformed };
  }
  return { ok: true, message };
}

function tooLarge(): PostBody {
  return refusal(413, JsonRpcError.InvalidRequest, `the body is larger than ${MAX_BODY_BYTES} bytes`, null);
}

/** The id of a JSON-RPC request, when it has a usable one. */
export function idOf(message: unknown): string | number | null {
  if (message === null || typeof message !== 'object' || Array.isArray(message)) return null;
  const id = (message as { id?: unknown }).id;
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

function refusal(status: number, code: number, message: string, id: string | number | null): PostBody {
  return { ok: false, status, error: { jsonrpc: '2.0', id, error: { code, message } } };
}
