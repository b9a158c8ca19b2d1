/**
 * The Contexts page's tool search: `system.tools.$search` (PROTOCOL 13) over a session of the
 * contexts the page lists, the same op and ranking an agent's `tool_search` gets.
 */
import type { BusClient } from '../../bus/client.js';
import { Mounts } from '../../bus/subjects.js';
import type { SearchReply } from '../../registry/types.js';
import { html, notice, type SafeHtml, table } from '../html.js';
import { contextLink, errorNotice } from './common.js';

/** Tools shown for a search. */
const SHOWN = 10;

/** The ranked tools of `keys` for `query`, as a section; nothing for an empty query. */
export async function toolSearchResults(client: BusClient, keys: readonly string[], query: string): Promise<SafeHtml> {
  if (query === '') return html``;
  if (keys.length === 0) return notice('info', 'No contexts listed: no tools to search');
  try {
    const session = { profile: 'console', toolContextRefs: [...keys] };
    const reply = await client.request<SearchReply>(
      Mounts.Tools,
      '$search',
      { session, query, limit: SHOWN },
      { timeoutMs: 5_000 },
    );
    const rows = reply.tools.map(
      (t, i) =>
        html`<tr data-tool="${t.name}"><td class="num">${i + 1}</td><td class="mono">${t.name}</td><td>${contextLink(t.context)}</td><td>${t.description}</td><td class="num">${t.score.toFixed(3)}</td></tr>`,
    );
    return html`<section class="card"><h2>Tools for “${query}”</h2>
      <p class="muted">${reply.tools.length} of ${reply.total} matching tools of the ${keys.length} contexts listed</p>
      ${table(['#', 'Tool', 'Context', 'Description', 'Score'], rows)}</section>`;
  } catch (err) {
    return errorNotice(err, 'The registry did not answer $search');
  }
}
