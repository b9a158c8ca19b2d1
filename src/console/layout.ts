/** The frame every console page shares: head, navigation, the live region. */
import { html, type SafeHtml } from './html.js';
import type { Page } from './types.js';

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

/** The whole document of a page. */
export function renderDocument(page: Page, writes: boolean, seq = 0): string {
  const follows = page.follows?.join(' ') ?? '';
  const nav = SECTIONS.map(
    (s) => html`<a href="${s.path}" aria-current="${s.path === page.section ? 'page' : 'false'}">${s.label}</a>`,
  );
  const token = writes
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
</head>
<body>
<header class="top">
<a class="brand" href="/contexts">matrix console</a>
<nav>${nav}</nav>
<span id="status" class="status">${follows ? 'connecting' : page.pollMs ? `refreshing every ${page.pollMs / 1000} s` : ''}</span>
${token}
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
