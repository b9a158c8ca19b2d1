/**
 * One session's tools in a MiniSearch index (BM25+ over name, description and arguments, with
 * prefix and fuzzy terms). It holds only the tools the session resolved to, so a search cannot
 * reach another tool: not its name, not its words, not its weight in the scores. It follows the
 * session's resolution by difference: a tool added is indexed, one removed or changed is taken
 * out (exactly, not discarded), and the rest stay as they are.
 */
import MiniSearch, { type SearchOptions } from 'minisearch';
import type { ResolvedTool } from '../types.js';
import { DOCUMENT_FIELDS, processTerm, type ToolDocument, tokenize, toolDocument } from './documents.js';

/**
 * How a query is matched and weighed: a name word counts three times a description word, an
 * argument's words a quarter; a term of 5 letters or more also matches words it begins and words
 * within a fifth of its length in edits. Any term may match (OR), more matched terms score
 * higher. The figures of each setting tried are in docs/search.md.
 */
export const SEARCH_OPTIONS: SearchOptions = {
  boost: { name: 3, description: 1, args: 0.25 },
  prefix: (term) => term.length >= 5,
  fuzzy: (term) => (term.length >= 5 ? 0.2 : false),
  combineWith: 'OR',
};

/** One tool found. */
export interface SearchHit {
  name: string;
  description: string;
  /** Key of the context the tool came from. */
  context: string;
  /** Relevance (BM25+), higher first, rounded to 6 decimals. */
  score: number;
}

/** What a search found: the best `limit` hits and how many matched in all. */
export interface SearchFound {
  tools: SearchHit[];
  total: number;
}

/** The index of one session's tools. */
export class SessionIndex {
  private readonly index: MiniSearch<ToolDocument>;
  /** The tools indexed, by name: each one's document is made again from it to take it out. */
  private readonly held = new Map<string, ResolvedTool>();
  /** The digest of the resolution the index follows now. */
  digest = '';

  /** @param options how queries match and weigh; `SEARCH_OPTIONS` unless a trial says otherwise. */
  constructor(options: SearchOptions = SEARCH_OPTIONS) {
    this.index = new MiniSearch<ToolDocument>({
      fields: [...DOCUMENT_FIELDS],
      idField: 'id',
      tokenize,
      processTerm,
      searchOptions: options,
      autoVacuum: false,
    });
  }

  /**
   * Makes the index hold exactly `tools` (but `skip`, the search tool itself), changing only the
   * tools that differ; returns how many documents it added or removed.
   */
  sync(tools: readonly ResolvedTool[], digest: string, skip?: string): number {
    let changes = 0;
    const wanted = new Map<string, ResolvedTool>();
    for (const tool of tools) if (tool.name !== skip) wanted.set(tool.name, tool);
    for (const [name, held] of this.held) {
      if (!wanted.has(name)) {
        this.index.remove(toolDocument(held));
        this.held.delete(name);
        changes++;
      }
    }
    for (const [name, tool] of wanted) {
      const held = this.held.get(name);
      if (held === tool) continue;
      const document = toolDocument(tool);
      this.held.set(name, tool);
      if (held !== undefined) {
        const before = toolDocument(held);
        if (sameDocument(before, document)) continue;
        this.index.remove(before);
        changes++;
      }
      this.index.add(document);
      changes++;
    }
    this.digest = digest;
    return changes;
  }

  /** The best `limit` tools for `query`, ties by name; `total` counts every tool that matched. */
  search(query: string, limit: number): SearchFound {
    const results = this.index.search(query);
    const hits: SearchHit[] = [];
    for (const r of results) {
      const held = this.held.get(r.id as string);
      if (held === undefined) continue;
      const { name, description, context } = held;
      hits.push({ name, description, context, score: Math.round(r.score * 1e6) / 1e6 });
    }
    hits.sort((a, b) => b.score - a.score || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return { tools: hits.slice(0, limit), total: hits.length };
  }

  /** Tools held. */
  get size(): number {
    return this.held.size;
  }
}

function sameDocument(a: ToolDocument, b: ToolDocument): boolean {
  return a.name === b.name && a.description === b.description && a.args === b.args;
}
