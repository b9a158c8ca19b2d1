/** The frame every console page shares: head, navigation, the live region. */
import { href, html, type SafeHtml } from './html.js';
import type { Person } from './sign-in.js';
import type { Page } from './types.js';

/** Who reads the page, where the console signs people in: nobody yet, or a person. */
export interface Viewer {
  person?: Person;
}

/** The navigation, in the order an operator's questions come. */
export const SECTIONS = [
  { path: '/contexts', label: 'Contexts' },
  { path: '/resolve', label: 'Resolve' },
  { path: '/calls', label: 'Calls' },
  { path: '/approvals', label: 'Approvals' },
  { path: '/mounts', label: 'Mounts' },
  { path: '/mcp', label: 'MCP servers' },
  { path: '/try', label: 'Try a tool' },
] as const;

/** The whole document of a page; `viewer` where the console signs people in through the IdP. */
export function renderDocument(page: Page, writes: boolean, seq = 0, viewer?: Viewer): string {
  const follows = page.follows?.join(' ') ?? '';
  const nav = SECTIONS.map(
    (s) => html`<a href="${s.path}" aria-current="${s.path === page.section ? 'page' : 'false'}">${s.label}</a>`,
  );
  const person = viewer?.person;
  // The session's secret is the page's, for the script to put in each write's form (console.js).
  const csrf = person === undefined ? '' : html`<meta name="console-csrf" content="${person.csrf}">`;
  const who =
    viewer === undefined
      ? ''
      : person === undefined
        ? html`<a class="signin" href="${href('/signin', { return: page.address ?? page.section ?? '/contexts' })}">Sign in</a>`
        : html`<span class="status person" title="${`subject ${person.subject}`}">${person.name}</span><form method="post" action="/signout" data-write class="signout"><button type="submit" class="secondary">Sign out</button></form>`;
  const token =
    person !== undefined && !writes
      ? ''
      : writes
        ? html`<input id="token" type="password" placeholder="write token" autocomplete="off" aria-label="write token" title="the token the console printed at start">`
        : html`<span class="status" title="start the console with --allow-writes to try tools and register contexts">read-only</span>`;
  const doc = html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${page.title} · matrix console</title>
<link rel="stylesheet" href="/console.css">
<script src="/console.js" defer></script>
${csrf}
</head>
<body>
<header class="top">
<a class="brand" href="/contexts">matrix console</a>
<nav>${nav}</nav>
<span id="status" class="status">${follows ? 'connecting' : page.pollMs ? `refreshing every ${page.pollMs / 1000} s` : ''}</span>
${token}
${who}
</header>
<main data-live="${follows}" data-poll="${page.pollMs ?? 0}" data-seq="${seq}"${page.needsToken ? html` data-needs-token` : ''}${page.address ? html` data-address="${page.address}"` : ''}>
<h1>${page.title}</h1>
${page.lead ? html`<p class="lead">${page.lead}</p>` : ''}
${page.head ?? ''}
<div id="live"${page.withoutToken ? html` data-without-token` : ''}>${page.live}</div>
</main>
</body>
</html>
`;
  return doc.text;
}

/** Only the live region, for the script's refreshes. */
export function renderFragment(page: Page): string {
  return page.live.text;
}

/** A pager under a table: where this page sits, and links to its neighbours. */
export function pager(
  shown: { from: number; to: number; total: number },
  prev: string | undefined,
  next: string | undefined,
): SafeHtml {
  const link = (to: string | undefined, label: string) =>
    to === undefined ? html`<span class="off">${label}</span>` : html`<a href="${to}">${label}</a>`;
  return html`<div class="pager"><span>${shown.total === 0 ? 'none' : `${shown.from}–${shown.to} of ${shown.total.toLocaleString('en')}`}</span><span class="links">${link(prev, '← previous')}${link(next, 'next →')}</span></div>`;
}
