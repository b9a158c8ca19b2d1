/** `search`: a session's tools ranked for a need, through `system.tools.$search` (PROTOCOL 13). */
import type { BusClient } from '../bus/client.js';
import { Mounts } from '../bus/subjects.js';
import type { SearchReply, SearchRequest } from '../registry/types.js';
import { wholeNumber } from './config.js';
import { ExitCode, json, type Output, table } from './output.js';
import { grantContext, type SessionFlags, sessionRequest } from './session-flags.js';

/** Most characters of a description in the table. */
const DESCRIPTION_CHARS = 80;

/** What `search` takes: the query, the session flags, and its own. */
export interface SearchArgs extends SessionFlags {
  query: string;
  limit?: string;
  json?: boolean;
}

/** `search`: the best tools of the session for the query, as a table (or the reply as JSON). */
export async function search(client: BusClient, args: SearchArgs, out: Output): Promise<number> {
  const request: SearchRequest = { session: sessionRequest(args), query: args.query };
  const limit = wholeNumber('--limit', args.limit, 1);
  if (limit !== undefined) request.limit = limit;
  const reply = await client.request<SearchReply>(Mounts.Tools, '$search', request, {
    timeoutMs: 5_000,
    ...grantContext(args),
  });
  if (args.json) {
    out.print(json(reply));
    return ExitCode.Ok;
  }
  const rows = reply.tools.map((t, i) => [String(i + 1), t.score.toFixed(3), t.name, t.context, short(t.description)]);
  out.print(table(['#', 'SCORE', 'TOOL', 'CONTEXT', 'DESCRIPTION'], rows));
  out.print(`(${reply.tools.length} of ${reply.total} matching tools)`);
  return ExitCode.Ok;
}

/** A description on one line, cut to `DESCRIPTION_CHARS`. */
function short(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > DESCRIPTION_CHARS ? `${line.slice(0, DESCRIPTION_CHARS - 1)}…` : line;
}
