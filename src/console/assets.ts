/**
 * The console's stylesheet and its one script, served as files (`/console.css`, `/console.js`)
 * so the pages' Content-Security-Policy can forbid inline script and style altogether. They
 * live here as text so the build needs no step beyond `tsc`.
 */

/** `/console.css`. */
export const STYLESHEET = `
:root {
  --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --soft: #f6f8fa; --bg: #f3f5f8; --card: #fff;
  --accent: #0969da; --ok: #1a7f37; --ok-bg: #dafbe1; --err: #cf222e; --err-bg: #ffebe9;
  --warn: #9a6700; --warn-bg: #fff8c5; --info-bg: #ddf4ff;
  --mono: ui-monospace, SFMono-Regular, "DejaVu Sans Mono", Menlo, Consolas, monospace;
}
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans", Arial, sans-serif; color: var(--fg); background: var(--bg); }
a { color: var(--accent); text-decoration: none; }
a:hover { text-decoration: underline; }
code, .mono { font-family: var(--mono); font-size: 12.5px; }
header.top { display: flex; align-items: center; gap: 24px; padding: 0 24px; height: 52px; background: #0d1117; color: #f0f6fc; }
header.top .brand { color: #f0f6fc; font-weight: 650; font-size: 15px; letter-spacing: .2px; }
header.top nav { display: flex; gap: 4px; flex: 1; }
header.top nav a { color: #c9d1d9; padding: 6px 12px; border-radius: 6px; }
header.top nav a[aria-current="page"] { background: #30363d; color: #fff; }
header.top nav a:hover { background: #21262d; text-decoration: none; }
header.top .status { font-size: 12px; color: #8b949e; white-space: nowrap; }
header.top .status.live::before { content: "●"; color: #3fb950; margin-right: 6px; }
header.top .status.down::before { content: "●"; color: #f85149; margin-right: 6px; }
header.top a.signin { color: #f0f6fc; border: 1px solid #30363d; padding: 4px 12px; border-radius: 6px; white-space: nowrap; }
header.top .status.person { color: #f0f6fc; }
header.top form.signout button { padding: 3px 10px; font-size: 12px; }
header.top input#token { width: 180px; padding: 4px 8px; border-radius: 6px; border: 1px solid #30363d; background: #161b22; color: #f0f6fc; font-size: 12px; }
main { max-width: 1320px; margin: 0 auto; padding: 20px 24px 48px; overflow-wrap: break-word; }
h1 { font-size: 22px; font-weight: 650; margin: 4px 0 4px; }
h2 { font-size: 16px; font-weight: 650; margin: 0 0 10px; }
h3 { font-size: 14px; font-weight: 650; margin: 14px 0 6px; }
p.lead { color: var(--muted); margin: 0 0 16px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 16px 18px; margin-bottom: 16px; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
.grid2 > * { min-width: 0; }
.table-wrap { overflow-x: auto; }
table { width: 100%; border-collapse: collapse; background: var(--card); }
th { text-align: left; font-size: 12px; font-weight: 600; color: var(--muted); text-transform: uppercase; letter-spacing: .4px; padding: 8px 10px; border-bottom: 1px solid var(--line); white-space: nowrap; }
td { padding: 7px 10px; border-bottom: 1px solid #eef1f4; vertical-align: top; }
tbody tr:hover { background: #f8fafc; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td .sub { color: var(--muted); font-size: 12.5px; overflow-wrap: anywhere; }
/* Identifiers as long as a line (approval ids, digests, targets) wrap rather than push the page wider. */
.approval h2, .approval p.muted, dl.facts dd { overflow-wrap: anywhere; }
td a.mono, td strong.mono { white-space: nowrap; }
/* Half a page (A beside B): names and headings wrap rather than push the table past its card. */
.grid2 th, .grid2 td a.mono, .grid2 td strong.mono { white-space: normal; }
.grid2 td { overflow-wrap: anywhere; }
.badge { display: inline-block; padding: 0 8px; border-radius: 10px; font-size: 12px; line-height: 20px; background: #eaeef2; color: var(--muted); white-space: nowrap; }
.badge.ok { background: var(--ok-bg); color: var(--ok); }
.badge.error { background: var(--err-bg); color: var(--err); }
.badge.warn { background: var(--warn-bg); color: var(--warn); }
.badge.info { background: var(--info-bg); color: var(--accent); }
.chips { display: flex; flex-wrap: wrap; gap: 4px; }
.chip { font-family: var(--mono); font-size: 12px; background: var(--soft); border: 1px solid #e3e8ee; border-radius: 4px; padding: 0 6px; }
.notice { border-radius: 8px; padding: 10px 14px; margin-bottom: 16px; border: 1px solid; }
.notice.error { background: var(--err-bg); border-color: #ffcecb; color: #82071e; }
.notice.ok { background: var(--ok-bg); border-color: #aceebb; color: #116329; }
.notice.info { background: var(--info-bg); border-color: #b6e3ff; color: #0a3069; }
.notice ul { margin: 6px 0 0; padding-left: 18px; }
form.filters { display: flex; flex-wrap: wrap; gap: 10px; align-items: end; margin-bottom: 14px; }
label { display: block; font-size: 12px; font-weight: 600; color: var(--muted); }
label > input, label > select, label > textarea { display: block; margin-top: 3px; }
label .hint { font-weight: 400; }
label.check { display: flex; align-items: center; gap: 6px; }
label.check > input { margin: 0; }
input, select, textarea { font: inherit; font-size: 13.5px; color: var(--fg); padding: 6px 9px; border: 1px solid var(--line); border-radius: 6px; background: #fff; }
textarea { font-family: var(--mono); font-size: 12.5px; min-height: 64px; width: 100%; }
input:focus, select:focus, textarea:focus { outline: 2px solid #54aeff66; border-color: var(--accent); }
fieldset { border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; margin: 0; display: grid; gap: 10px; min-width: 0; }
fieldset label > input:not([type="checkbox"]), .fields label > input:not([type="checkbox"]), .fields label > select { width: 100%; }
h2 .mono { font-size: inherit; }
h2 .meta, h2 a { font-size: 13px; font-weight: 400; margin-left: 8px; }
.fields > h2, .fields > p { margin: 0; }
legend { font-weight: 650; padding: 0 6px; }
.fields { display: grid; gap: 10px; }
.row { display: flex; gap: 10px; align-items: center; flex-wrap: wrap; }
dl.facts + form.row { margin-top: 14px; }
button { font: inherit; font-weight: 600; padding: 6px 16px; border-radius: 6px; border: 1px solid #1f883d; background: #1f883d; color: #fff; cursor: pointer; }
button.secondary { background: #fff; color: var(--fg); border-color: var(--line); }
button.danger { background: #fff; color: var(--err); border-color: #ffcecb; }
button:disabled { opacity: .5; cursor: not-allowed; }
pre { font-family: var(--mono); font-size: 12.5px; background: var(--soft); border: 1px solid #e3e8ee; border-radius: 6px; padding: 10px 12px; overflow: auto; max-height: 520px; margin: 6px 0; white-space: pre-wrap; word-break: break-word; }
details > summary { cursor: pointer; color: var(--accent); font-size: 13px; }
.pager { display: flex; gap: 12px; align-items: center; justify-content: space-between; margin-top: 12px; color: var(--muted); }
.pager .links { display: flex; gap: 6px; }
.pager a, .pager span.off { padding: 4px 12px; border: 1px solid var(--line); border-radius: 6px; background: #fff; }
.pager span.off { color: #b0b8c1; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 6px 18px; margin: 0; }
dl.facts dt { color: var(--muted); font-size: 12.5px; }
dl.facts dd { margin: 0; }
.mounts { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(560px, 100%), 1fr)); gap: 16px; align-items: start; }
.mounts > * { min-width: 0; }
.diff td { font-family: var(--mono); font-size: 12px; white-space: pre-wrap; word-break: break-all; padding: 1px 8px; border: 0; width: 50%; }
.diff tr.del td.a, .diff tr.change td.a { background: var(--err-bg); }
.diff tr.add td.b, .diff tr.change td.b { background: var(--ok-bg); }
.diff tr.fold td { background: var(--soft); color: var(--muted); text-align: center; font-family: inherit; }
.muted { color: var(--muted); }
.right { margin-left: auto; }
.content-model { white-space: pre-wrap; background: #fff; border-left: 3px solid var(--accent); }
form.answer input[name="reason"] { flex: 1 1 220px; min-width: 0; }
/* A phone: the navigation wraps under the name, one column, the answer form's buttons full size. */
@media (max-width: 760px) {
  header.top { flex-wrap: wrap; height: auto; gap: 6px 12px; padding: 8px 12px; }
  header.top nav { order: 3; flex: 1 1 100%; flex-wrap: wrap; gap: 2px; }
  header.top nav a { padding: 6px 10px; }
  header.top input#token { width: 140px; }
  header.top .status { margin-left: auto; }
  main { padding: 14px 12px 40px; }
  .grid2 { grid-template-columns: 1fr; }
  .card { padding: 12px; }
  dl.facts { grid-template-columns: 1fr; gap: 2px; }
  dl.facts dd { margin-bottom: 6px; }
  form.filters > label, form.filters input, form.filters select { width: 100%; }
  form.filters > label { flex: 1 1 140px; }
  form.answer button { flex: 1 1 0; padding: 10px 16px; }
  form.answer input[name="reason"] { flex-basis: 100%; padding: 10px; }
  .diff td { word-break: break-all; }
}
`;

/**
 * `/console.js`: live regions and the write token. A page's `<main data-live="registry call">`
 * follows those server-sent events (and `data-poll` refreshes on a timer) by fetching its own
 * URL's fragment and swapping `#live`; forms marked `data-instant` search as one types; forms
 * marked `data-write` carry the token the operator pasted (kept for the tab only) and, for a
 * person signed in, their session's secret (the page's `console-csrf`), and so does
 * every refresh of a live region (a page marked `data-needs-token` serves it only with one). A
 * refresh waits while focus is in a form of the region, and keeps what was typed in its fields.
 */
export const CLIENT_SCRIPT = `(() => {
  'use strict';
  const main = document.querySelector('main');
  const live = document.getElementById('live');
  const status = document.getElementById('status');
  const kinds = ((main && main.dataset.live) || '').split(' ').filter(Boolean);
  const KEY = 'matrix-console-token';
  let timer = 0, again = false, controller;

  async function refresh() {
    if (!live) return;
    if (controller) controller.abort();
    controller = new AbortController();
    try {
      const headers = { 'X-Console-Fragment': '1' };
      const token = sessionStorage.getItem(KEY);
      if (token) headers['X-Console-Token'] = token;
      const res = await fetch(location.href, { headers, signal: controller.signal });
      // A 401 is the page saying the token is missing or wrong: that, too, is shown.
      if (res.ok || res.status === 401) {
        const markup = await res.text();
        // Not from under a person filling in a form of the region: the swap waits until focus
        // leaves the form (a reason half typed, a click on Reject between mousedown and mouseup).
        if (editing()) { held = true; return; }
        // What the reader opened stays open, and what they typed stays typed: a refresh
        // replaces the markup, not the reading.
        const details = [...live.querySelectorAll('details')];
        const open = details.map((d) => d.open);
        const typed = typedFields();
        const failed = [...live.querySelectorAll('[data-failed]')];
        live.innerHTML = markup;
        keepFailures(failed);
        live.querySelectorAll('details').forEach((d, i) => { if (open[i]) d.open = true; });
        for (const [key, field] of fieldsByKey()) if (typed.has(key)) field.value = typed.get(key);
        if (kinds.length === 0) setStatus('live', 'refreshed ' + new Date().toLocaleTimeString());
      }
    } catch (err) {
      if (err.name !== 'AbortError') setStatus('down', 'offline');
    }
  }
  // A refused write's error, where the person clicked: a refresh's markup has none (it is a
  // read), so each goes back into its place (data-slot), or on top once that place is gone.
  function keepFailures(failed) {
    for (const note of failed) {
      const key = CSS.escape(note.dataset.failed);
      if (live.querySelector('[data-failed="' + key + '"]')) continue;
      const slot = live.querySelector('[data-slot="' + key + '"]');
      if (slot) slot.append(note); else live.prepend(note);
    }
  }
  // A refused write renders the page it came from: the address becomes that page's, so that a
  // refresh or a reload reads it, never the write; the error shows where the person was.
  if (main && main.dataset.address && location.pathname + location.search !== main.dataset.address)
    history.replaceState(null, '', main.dataset.address);
  const refusal = document.querySelector('[data-failed]');
  if (refusal) refusal.scrollIntoView({ block: 'center' });
  let held = false;
  function editing() {
    const el = document.activeElement;
    return !!(el && live.contains(el) && el.closest('form'));
  }
  if (live) live.addEventListener('focusout', () => {
    // Where focus went is known only once it has moved.
    setTimeout(() => { if (held && !editing()) { held = false; schedule(); } }, 0);
  });
  // The text fields of the region's forms, each by its form's action, the form's hidden
  // fields (which approval) and its own name: the same field in the markup that replaces it.
  function fieldsByKey() {
    const out = [];
    for (const form of live.querySelectorAll('form')) {
      const hidden = [...form.querySelectorAll('input[type="hidden"]')].map((h) => h.name + '=' + h.value).join('&');
      for (const field of form.querySelectorAll('input:not([type]), input[type="text"], input[type="search"], textarea'))
        out.push([form.getAttribute('action') + '?' + hidden + '#' + field.name, field]);
    }
    return out;
  }
  function typedFields() {
    const typed = new Map();
    for (const [key, field] of fieldsByKey()) if (field.value !== field.defaultValue) typed.set(key, field.value);
    return typed;
  }
  // At most one refresh per 150 ms: the first change shows at once, a burst costs one more fetch.
  function schedule() {
    if (timer) { again = true; return; }
    refresh();
    timer = setTimeout(() => { timer = 0; if (again) { again = false; schedule(); } }, 150);
  }
  function setStatus(cls, text) {
    if (!status) return;
    status.className = 'status ' + cls;
    status.textContent = text;
  }

  // The feed's event count when the page was rendered: a different count in the stream's
  // hello means an event came and went before the page was listening.
  let seq = Number((main && main.dataset.seq) || 0);
  function heard(event) {
    let data = {};
    try { data = JSON.parse(event.data); } catch (err) { /* not ours */ }
    if (event.type === 'hello' && data.seq === seq) return;
    if (typeof data.seq === 'number') seq = data.seq;
    schedule();
  }
  if (kinds.length > 0) {
    const events = new EventSource('/events');
    events.addEventListener('hello', heard);
    for (const kind of kinds) events.addEventListener(kind, heard);
    events.onopen = () => setStatus('live', 'live');
    events.onerror = () => setStatus('down', 'reconnecting');
  }
  const poll = Number((main && main.dataset.poll) || 0);
  if (poll > 0) setInterval(schedule, poll);

  for (const form of document.querySelectorAll('form[data-instant]')) {
    let wait = 0;
    form.addEventListener('input', () => {
      clearTimeout(wait);
      wait = setTimeout(() => {
        const url = new URL(form.getAttribute('action') || location.pathname, location.href);
        url.search = '';
        for (const [name, value] of new FormData(form)) if (value !== '' && name !== 'page') url.searchParams.set(name, String(value));
        history.replaceState(null, '', url);
        schedule();
      }, 200);
    });
  }

  // A live region that needs the token is fetched with it at once, and again when it is typed.
  const needsToken = main && main.hasAttribute('data-needs-token');
  const tokenInput = document.getElementById('token');
  if (tokenInput) {
    tokenInput.value = sessionStorage.getItem(KEY) || '';
    tokenInput.addEventListener('input', () => {
      sessionStorage.setItem(KEY, tokenInput.value.trim());
      if (needsToken) schedule();
    });
  }
  // A page rendered without the token (a link, a reload, the redirect after Approve) says it
  // needs one; holding one, the script shows the region loading instead, then fetches it.
  if (needsToken && sessionStorage.getItem(KEY)) {
    if (live && live.hasAttribute('data-without-token')) {
      const loading = document.createElement('div');
      loading.className = 'notice info';
      loading.setAttribute('aria-busy', 'true');
      loading.textContent = 'Loading with your token…';
      live.replaceChildren(loading);
      live.removeAttribute('data-without-token');
    }
    schedule();
  }
  // A write's form carries the token and, for a person signed in through the IdP, the session's
  // secret, each as a hidden field put in at submit.
  function hidden(form, name, value) {
    let field = form.querySelector('input[name="' + name + '"]');
    if (!field) {
      field = document.createElement('input');
      field.type = 'hidden';
      field.name = name;
      form.append(field);
    }
    field.value = value;
  }
  document.addEventListener('submit', (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute('data-write')) return;
    hidden(form, 'token', sessionStorage.getItem(KEY) || '');
    const csrf = document.querySelector('meta[name="console-csrf"]');
    if (csrf) hidden(form, 'csrf', csrf.getAttribute('content') || '');
  });
})();
`;
