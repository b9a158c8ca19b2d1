/** What the console's pages are made of, and what they are given. */
import type { NatsConnection } from '@nats-io/nats-core';
import type { BusClient } from '../bus/client.js';
import type { ContextIndex } from './contexts-index.js';
import type { SafeHtml } from './html.js';
import type { LiveFeed } from './live.js';
import type { ConsoleSignIn, Person } from './sign-in.js';

/** The server-sent events a page can follow. */
export type LiveKind = 'registry' | 'call' | 'approval';

/** One rendered page. */
export interface Page {
  /** Heading and document title. */
  title: string;
  /** The navigation entry it belongs to (its path). */
  section: string;
  /** One line under the heading. */
  lead?: string;
  /** What stays put on refresh: forms, headings. */
  head?: SafeHtml;
  /** The region that is re-fetched when the page's events arrive. */
  live: SafeHtml;
  /** Events that refresh `live`. */
  follows?: LiveKind[];
  /** Refresh `live` this often, in ms (for what has no events, like discovery). */
  pollMs?: number;
  /** HTTP status; default 200. */
  status?: number;
  /** `live` is served only with the token (`X-Console-Token`): the script fetches it at once when it holds one. */
  needsToken?: boolean;
  /** `live` was rendered without the token and says so: a script holding one shows it loading instead. */
  withoutToken?: boolean;
  /**
   * The address the page stands for, where the request's is a write's (a refused POST renders
   * the page it came from): the script puts it in the address bar, so that a refresh or a reload
   * reads the page, never the write. Default: the request's own.
   */
  address?: string;
}

/** A redirect after a write (303 See Other). */
export interface Redirect {
  redirect: string;
}

/** What every page handler can use. */
export interface ConsoleDeps {
  nc: NatsConnection;
  client: BusClient;
  index: ContextIndex;
  feed: LiveFeed;
  /** Started with operator rights: try and register are on. */
  writes: boolean;
  /** The approver grant `$pending` and `$answer` are sent with (`--approver-grant`, or pasted once). */
  approver: { grant?: string };
  /** Sign-in through the organisation's IdP (`--oidc-issuer`); undefined without it. */
  signIn?: ConsoleSignIn;
}

/** One request, parsed. */
export interface ConsoleRequest {
  method: string;
  url: URL;
  /** The form fields of a POST (URL-encoded), empty for GET. */
  form: URLSearchParams;
  deps: ConsoleDeps;
  /** It carries the console's token (the `X-Console-Token` header, or a POST's checked `token` field). */
  withToken?: boolean;
  /** The person signed in through the IdP: what they do is sent with their access token as the grant. */
  person?: Person;
}
