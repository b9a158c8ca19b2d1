/** `$list` (PROTOCOL 5.1): pages of contexts in key order, pure over a store. */
import { BadRequestError } from '../bus/errors.js';
import type { StoredContext, ToolContextStore } from './store.js';
import type { ListedContext, ListReply, ListRequest } from './types.js';

/** Page size when the request names none. */
export const DEFAULT_PAGE_SIZE = 100;

/** Bytes a page leaves for the rest of its reply (`revision`, `nextCursor`, the envelope). */
const REPLY_ENVELOPE_BYTES = 1024;

/**
 * One page of contexts after `cursor`, filtered by `keys` and `tool`: `limit` of them, or fewer
 * where more would not fit in `maxReplyBytes` (the server's max_payload), each counted as its
 * JSON's bytes (what MessagePack takes at most). 500 contexts of the largest a spec may have
 * (an 8 KiB description, 256 tools, 64 capabilities each way) made a 16.7 MB reply: 87-259 ms
 * to build and encode on the event loop, then refused as too large. A page stops where the
 * reply is full, with a `nextCursor` past its last context; the first always goes in.
 */
export function listContexts(
  request: ListRequest,
  store: ToolContextStore,
  maxReplyBytes = Number.POSITIVE_INFINITY,
): ListReply {
  const limit = request.limit ?? DEFAULT_PAGE_SIZE;
  const after = request.cursor === undefined ? undefined : decodeCursor(request.cursor);
  const keys = request.keys === undefined ? store.keys() : [...new Set(request.keys)].sort();
  let i = after === undefined ? 0 : firstAfter(keys, after);
  const contexts: ListedContext[] = [];
  let nextCursor: string | undefined;
  let room = maxReplyBytes - REPLY_ENVELOPE_BYTES;
  for (; i < keys.length; i++) {
    const stored = store.get(keys[i] as string);
    if (stored === undefined || !hasTool(stored, request.tool)) continue;
    const item = contexts.length === limit ? undefined : listed(stored);
    if (item !== undefined && room !== Number.POSITIVE_INFINITY) room -= listedBytes(stored, item);
    if (item === undefined || (room < 0 && contexts.length > 0)) {
      nextCursor = encodeCursor((contexts[contexts.length - 1] as ListedContext).key);
      break;
    }
    contexts.push(item);
  }
  const reply: ListReply = { contexts, revision: store.revision };
  if (nextCursor !== undefined) reply.nextCursor = nextCursor;
  return reply;
}

/**
 * What each stored context (a new object at each change) takes in a page, measured once: a page of
 * 100 measured every `$list`.
 */
const bytesListed = new WeakMap<StoredContext, number>();

function listedBytes(stored: StoredContext, item: ListedContext): number {
  let bytes = bytesListed.get(stored);
  if (bytes === undefined) {
    bytes = Buffer.byteLength(JSON.stringify(item));
    bytesListed.set(stored, bytes);
  }
  return bytes;
}

function listed({ spec, source, revision }: StoredContext): ListedContext {
  const item: ListedContext = {
    key: spec.key,
    title: spec.title,
    description: spec.description,
    tools: (spec.matrixTools ?? []).map((t) => t.name),
    source,
    revision,
  };
  if (spec.provides?.length) item.provides = spec.provides;
  if (spec.requires?.length) item.requires = spec.requires;
  return item;
}

function hasTool(stored: StoredContext, tool: string | undefined): boolean {
  return tool === undefined || (stored.spec.matrixTools ?? []).some((t) => t.name === tool);
}

/** Index of the first key greater than `key` in sorted `keys` (binary search). */
function firstAfter(keys: readonly string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((keys[mid] as string) <= key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const cursorPrefix = 'k:';

function encodeCursor(key: string): string {
  return Buffer.from(cursorPrefix + key, 'utf8').toString('base64url');
}

function decodeCursor(cursor: string): string {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!text.startsWith(cursorPrefix) || Buffer.from(text, 'utf8').toString('base64url') !== cursor) {
    throw new BadRequestError('cursor is not one this registry issued; pass nextCursor from the previous page', {
      details: { violations: [{ path: '/cursor', message: 'is not a cursor this registry issued' }] },
    });
  }
  return text.slice(cursorPrefix.length);
}
