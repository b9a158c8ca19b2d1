/**
 * One `$call` of an MCP tool, upstream and back: the deadline as the timeout, progress to a
 * caller that asked for it (at most one report each 50 ms), the mount's cancel signal as the
 * SDK's (`notifications/cancelled`), and every way it can fail as a typed error.
 */
import { type CallToolResult, McpError, ErrorCode as McpErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { CancelledError, type OpContext } from '../../bus/context.js';
import {
  BadRequestError,
  InternalError,
  MatrixError,
  NotFoundError,
  TimeoutError,
  UnavailableError,
} from '../../bus/errors.js';
import type { Upstream } from './upstream.js';

/** Longest wait for a call that carries no deadline, in ms. */
const DEFAULT_CALL_TIMEOUT_MS = 60_000;
/** Fewest ms between two progress reports relayed to the caller. */
const PROGRESS_EVERY_MS = 50;

/**
 * What a host replies to a tool's op: MCP's `CallToolResult` as the server gave it — its
 * content blocks (text, image, audio, resource links, embedded resources), its
 * `structuredContent`, and `isError` (always present). The dispatcher's `json` mode carries it
 * whole as the ToolResult's `structured`, and its JSON as `content`.
 */
export interface HostReply {
  content: CallToolResult['content'];
  structuredContent?: Record<string, unknown>;
  isError: boolean;
}

/** Calls `tool` on `upstream` for the request `ctx`. */
export async function callUpstream(
  upstream: Upstream,
  mount: string,
  tool: string,
  args: Record<string, unknown>,
  ctx: OpContext,
  fallbackTimeoutMs: number | undefined,
): Promise<HostReply> {
  const timeoutMs =
    ctx.deadline !== undefined
      ? Math.max(1, ctx.deadline - Date.now())
      : (fallbackTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS);
  let last = 0;
  try {
    const result = await upstream.call(tool, args, {
      signal: ctx.signal,
      timeoutMs,
      ...(ctx.wantsProgress && {
        onProgress: (p) => {
          const now = performance.now();
          if (now - last < PROGRESS_EVERY_MS) return;
          last = now;
          ctx.progress(p.progress, p.total, p.message);
        },
      }),
    });
    const reply: HostReply = { content: result.content ?? [], isError: result.isError === true };
    if (result.structuredContent !== undefined) reply.structuredContent = result.structuredContent;
    return reply;
  } catch (err) {
    throw typedError(err, mount, tool, ctx.signal);
  }
}

/** A failure of an upstream call as the bus says it. */
export function typedError(err: unknown, mount: string, tool: string, signal: AbortSignal): Error {
  // The caller's cancel or deadline: the mount answers it as such.
  if (signal.aborted && (signal.reason instanceof CancelledError || signal.reason instanceof MatrixError))
    return signal.reason as Error;
  if (err instanceof MatrixError || err instanceof CancelledError) return err;
  const what = `${mount} tool ${tool}`;
  if (err instanceof McpError) {
    switch (err.code) {
      case McpErrorCode.ConnectionClosed:
        return new UnavailableError(`${what}: the server's connection closed during the call; it is being restarted`);
      case McpErrorCode.RequestTimeout:
        return new TimeoutError(`${what}: the server did not answer in time`);
      case McpErrorCode.InvalidParams:
      case McpErrorCode.InvalidRequest:
        return new BadRequestError(`${what}: the server refused the arguments: ${err.message}`);
      case McpErrorCode.MethodNotFound:
        return new NotFoundError(`${what}: the server does not know it: ${err.message}`);
      default:
        return new InternalError(`${what}: the server answered JSON-RPC error ${err.code}: ${err.message}`);
    }
  }
  return new UnavailableError(`${what}: the server cannot be reached: ${(err as Error).message}`);
}
