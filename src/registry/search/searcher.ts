/**
 * `$search` over sessions (PROTOCOL 13): one index per session, made on its first search and
 * kept within a bound of tools indexed (least recently searched out first; about 12 KiB of heap
 * per tool of real MCP servers, bench/search.ts), each following its session's resolution by
 * difference.
 * A search costs what the session holds, whatever the registry holds; a change elsewhere costs a
 * session nothing but a digest comparison, and a `$register` it reaches is searchable at once.
 */
import type { SearchOptions } from 'minisearch';
import { providerToolsOf } from '../provider-formats.js';
import type { Diagnostic, ResolvedToolContext, ResolveRequest, SearchReply } from '../types.js';
import { DEFAULT_SEARCH_LIMIT, SEARCH_TOOL_NAME, toolReferences, toolSearchOutput } from './search-tool.js';
import { SEARCH_OPTIONS, type SearchFound, SessionIndex } from './session-index.js';

/** Tools the session indexes hold at most, by default (about 100 MiB of heap). */
export const DEFAULT_SEARCH_TOOLS = 8_192;

/** The session indexes of one registry instance. */
export class ToolSearch {
  private readonly indexes = new Map<string, SessionIndex>();
  private toolsHeld = 0;

  /**
   * @param maxTools most tools the kept indexes hold; the least recently searched go first (the
   *   one searched now stays, however large).
   * @param options how queries match and weigh (`SEARCH_OPTIONS` by default).
   */
  constructor(
    private readonly maxTools = DEFAULT_SEARCH_TOOLS,
    private readonly options: SearchOptions = SEARCH_OPTIONS,
  ) {}

  /**
   * The best `limit` tools of the session `key` resolved to `resolved` for `query`: the index
   * synced to the resolution first when its digest changed.
   */
  find(key: string, resolved: ResolvedToolContext, query: string, limit = DEFAULT_SEARCH_LIMIT): SearchFound {
    return this.indexOf(key, resolved).search(query, limit);
  }

  /** `$search`'s reply: what `find` found, and the provider's result shape for the session's format. */
  reply(
    key: string,
    session: ResolveRequest,
    resolved: ResolvedToolContext,
    query: string,
    limit?: number,
  ): SearchReply {
    const found: SearchReply = this.find(key, resolved, query, limit);
    const names = found.tools.map((t) => t.name);
    if (session.format === 'anthropic') found.providerResult = toolReferences(names);
    else if (session.format === 'openai') {
      const byName = new Map(resolved.matrixTools.map((t) => [t.name, t]));
      const tools = names.flatMap((n) => byName.get(n) ?? []);
      const unused: Diagnostic[] = [];
      found.providerResult = toolSearchOutput(providerToolsOf(tools, 'openai', session.strict === true, unused));
    }
    return found;
  }

  /** Session indexes held now. */
  get sessions(): number {
    return this.indexes.size;
  }

  /** Tools the session indexes hold now. */
  get tools(): number {
    return this.toolsHeld;
  }

  private indexOf(key: string, resolved: ResolvedToolContext): SessionIndex {
    const index = this.indexes.get(key) ?? new SessionIndex(this.options);
    this.indexes.delete(key);
    this.indexes.set(key, index);
    if (index.digest !== resolved.digest) {
      this.toolsHeld -= index.size;
      index.sync(resolved.matrixTools, resolved.digest, SEARCH_TOOL_NAME);
      this.toolsHeld += index.size;
    }
    for (const [oldest, held] of this.indexes) {
      if (this.toolsHeld <= this.maxTools || held === index) break;
      this.indexes.delete(oldest);
      this.toolsHeld -= held.size;
    }
    return index;
  }
}
