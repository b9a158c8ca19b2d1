/**
 * `$search` over sessions (PROTOCOL 13): one index per session, made on its first search and
 * kept (least recently used first out), each following its session's resolution by difference.
 * A search costs what the session holds, whatever the registry holds; a change elsewhere costs a
 * session nothing but a digest comparison, and a `$register` it reaches is searchable at once.
 */
import type { SearchOptions } from 'minisearch';
import { providerToolsOf } from '../provider-formats.js';
import type { Diagnostic, ResolvedToolContext, ResolveRequest, SearchReply } from '../types.js';
import { DEFAULT_SEARCH_LIMIT, SEARCH_TOOL_NAME, toolReferences, toolSearchOutput } from './search-tool.js';
import { SEARCH_OPTIONS, type SearchFound, SessionIndex } from './session-index.js';

/** Session indexes kept by default. */
export const DEFAULT_SEARCH_SESSIONS = 1_024;

/** The session indexes of one registry instance. */
export class ToolSearch {
  private readonly indexes = new Map<string, SessionIndex>();

  /**
   * @param maxSessions most session indexes kept; the least recently searched go first.
   * @param options how queries match and weigh (`SEARCH_OPTIONS` by default).
   */
  constructor(
    private readonly maxSessions = DEFAULT_SEARCH_SESSIONS,
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

  private indexOf(key: string, resolved: ResolvedToolContext): SessionIndex {
    let index = this.indexes.get(key);
    if (index === undefined) {
      index = new SessionIndex(this.options);
      if (this.indexes.size >= this.maxSessions) this.indexes.delete(this.indexes.keys().next().value as string);
    } else this.indexes.delete(key);
    this.indexes.set(key, index);
    if (index.digest !== resolved.digest) index.sync(resolved.matrixTools, resolved.digest, SEARCH_TOOL_NAME);
    return index;
  }
}
