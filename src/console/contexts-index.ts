/**
 * Every context the registry lists, held by the console so a page of 10,000 is searched and
 * cut in memory (a few ms) instead of paging `$list` for each request. It is filled by
 * paging `system.tools.$list` and kept current by the registry's change events: each
 * changed key is listed again (`$list {keys}`), many keys in one request.
 */
import type { BusClient } from '../bus/client.js';
import { Mounts } from '../bus/subjects.js';
import type { ListedContext, ListReply } from '../registry/types.js';

/** Largest page `$list` serves. */
const LIST_PAGE = 500;

/** What a search asks for. */
export interface ContextSearch {
  /** Words that must all appear in a context's key, title, description, tools or capabilities (any case). */
  q?: string;
  source?: 'built-in' | 'registered';
  /** 1-based. */
  page?: number;
  pageSize?: number;
}

/** One page of a search. */
export interface ContextPage {
  items: ListedContext[];
  /** Contexts that match, on every page. */
  total: number;
  page: number;
  pages: number;
  pageSize: number;
}

interface Entry {
  context: ListedContext;
  /** Lower-case text a search looks in. */
  haystack: string;
}

/** The registry's contexts, in key order, searchable. */
export class ContextIndex {
  private byKey = new Map<string, Entry>();
  private ordered: Entry[] = [];
  /** The registry revision the index last saw. */
  revision = 0;
  /** Why the last load failed, while it has not succeeded since. */
  error: string | undefined;
  /** How long the last full load took, in ms. */
  loadMs = 0;

  constructor(private readonly client: BusClient) {}

  /** Contexts held. */
  get size(): number {
    return this.byKey.size;
  }

  /** Lists every context again, page by page, and replaces what the index held. */
  async reload(): Promise<void> {
    const started = performance.now();
    const next = new Map<string, Entry>();
    let cursor: string | undefined;
    let revision = 0;
    try {
      do {
        const page = await this.client.request<ListReply>(
          Mounts.Tools,
          '$list',
          cursor === undefined ? { limit: LIST_PAGE } : { limit: LIST_PAGE, cursor },
        );
        for (const c of page.contexts) next.set(c.key, entryOf(c));
        cursor = page.nextCursor;
        revision = page.revision;
      } while (cursor !== undefined);
    } catch (err) {
      this.error = (err as Error).message;
      throw err;
    }
    this.byKey = next;
    this.revision = revision;
    this.error = undefined;
    this.loadMs = performance.now() - started;
    this.reorder();
  }

  /** Lists `keys` again: a key the registry no longer lists leaves the index. */
  async refresh(keys: readonly string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += LIST_PAGE) {
      const chunk = keys.slice(i, i + LIST_PAGE);
      const page = await this.client.request<ListReply>(Mounts.Tools, '$list', { keys: chunk, limit: LIST_PAGE });
      const found = new Set(page.contexts.map((c) => c.key));
      for (const c of page.contexts) this.byKey.set(c.key, entryOf(c));
      for (const key of chunk) if (!found.has(key)) this.byKey.delete(key);
      this.revision = Math.max(this.revision, page.revision);
    }
    this.reorder();
  }

  /** One context by key. */
  get(key: string): ListedContext | undefined {
    return this.byKey.get(key)?.context;
  }

  /** The keys held that start with `prefix`, in key order. */
  keys(prefix = ''): string[] {
    return this.ordered.map((e) => e.context.key).filter((k) => k.startsWith(prefix));
  }

  /** One page of the contexts that match, in key order. */
  search(query: ContextSearch = {}): ContextPage {
    const words = (query.q ?? '').toLowerCase().split(/\s+/).filter(Boolean);
    const pageSize = Math.min(Math.max(query.pageSize ?? 50, 1), 500);
    const matches = this.ordered.filter(
      (e) =>
        (query.source === undefined || e.context.source === query.source) && words.every((w) => e.haystack.includes(w)),
    );
    const pages = Math.max(1, Math.ceil(matches.length / pageSize));
    const page = Math.min(Math.max(Math.trunc(query.page ?? 1), 1), pages);
    const start = (page - 1) * pageSize;
    return {
      items: matches.slice(start, start + pageSize).map((e) => e.context),
      total: matches.length,
      page,
      pages,
      pageSize,
    };
  }

  private reorder(): void {
    this.ordered = [...this.byKey.values()].sort((a, b) =>
      a.context.key < b.context.key ? -1 : a.context.key > b.context.key ? 1 : 0,
    );
  }
}

function entryOf(context: ListedContext): Entry {
  const text = [
    context.key,
    context.title,
    context.description,
    ...context.tools,
    ...(context.provides ?? []),
    ...(context.requires ?? []),
  ];
  return { context, haystack: text.join('\n').toLowerCase() };
}
