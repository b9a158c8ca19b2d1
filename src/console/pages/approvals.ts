/**
 * Approvals: the calls waiting for a person (`system.approvals.$pending`), live, each with its
 * arguments pretty-printed (control, bidi and separator characters shown as `\u` escapes, so
 * they read as what they are), who asks, which session and how long it has left; Approve and
 * Reject (with a reason) answer through `$answer`. Listing and answering use the console's
 * approver grant (`--approver-grant FILE`, or one pasted here once, kept in the console's
 * memory) or, for a person signed in through the IdP, their access token, so that the service
 * records them as who answered; answering is a write: `--allow-writes` and the token, or a
 * person signed in.
 */

import { type AnswerReply, ApprovalOp, type PendingApproval, type PendingReply } from '../../approvals/types.js';
import { ErrorCode, MatrixError } from '../../bus/errors.js';
import { Mounts } from '../../bus/subjects.js';
import { left } from '../../cli/approvals.js';
import { printable } from '../../printable.js';
import { badge, href, html, notice, type SafeHtml } from '../html.js';
import type { ConsoleRequest, LiveKind, Page, Redirect } from '../types.js';
import { actingGrant, errorNotice, FormError, statusOf } from './common.js';

const SECTION = '/approvals';
const TIMEOUT_MS = 10_000;

/** A write of this page that failed: which form, and for an answer, which approval and the reason typed. */
interface Failed {
  error: unknown;
  /** The approval an answer was for; undefined for the grant form. */
  approvalId?: string;
  reason?: string;
}

/** `GET /approvals`: the pending approvals the console's grant may answer; `failed`, a write that was not taken. */
export async function approvalsPage(request: ConsoleRequest, failed?: Failed): Promise<Page> {
  const { deps, url } = request;
  const answered = url.searchParams.get('answered');
  const common = {
    title: 'Approvals',
    section: SECTION,
    lead: 'Gated calls waiting for a person, oldest first: approve one and it runs, once; reject it and the model reads your reason.',
    follows: ['approval'] as LiveKind[],
    // Time left moves without events.
    pollMs: 15_000,
    needsToken: true,
    // A write's page stands for the list: a reload or a refresh reads it, never the write again.
    ...(failed === undefined ? {} : { address: SECTION }),
  };
  const person = request.person;
  const grant = person?.grant ?? deps.approver.grant;
  const writes = deps.writes || person !== undefined;
  const grantFailed = failed !== undefined && failed.approvalId === undefined ? failed.error : undefined;
  const head =
    person !== undefined
      ? notice(
          'info',
          `You answer as ${person.name}`,
          html`Signed in through ${deps.signIn?.issuer ?? 'the identity provider'} (subject <code>${person.subject}</code>): what you approve or reject is sent with your access token, and recorded as yours.`,
        )
      : html`${deps.writes ? '' : notice('info', 'This console is read-only', deps.signIn ? 'Sign in to approve or reject.' : 'Start it with --allow-writes to approve or reject.')}
    ${deps.writes ? grantForm(grant !== undefined, grantFailed) : ''}`;
  if (!request.withToken && person === undefined)
    return { ...common, head, ...tokenNeeded(deps.writes, deps.signIn !== undefined) };
  let listed: PendingApproval[] | undefined;
  let more = false;
  let problem: unknown;
  try {
    ({ listed, more } = await pendingOf(request));
  } catch (err) {
    problem = err;
  }
  const answer = failed?.approvalId === undefined ? undefined : (failed as Required<Failed>);
  // An answer whose approval is no longer listed (answered elsewhere, expired) says why on top.
  const orphan = answer !== undefined && !listed?.some((a) => a.approvalId === answer.approvalId);
  const decision = url.searchParams.get('decision') === 'approve' ? 'Approved' : 'Rejected';
  const live = html`${answered ? notice('ok', `${decision} ${answered}`, `as ${url.searchParams.get('by') ?? '?'} at ${url.searchParams.get('at') ?? '?'}`) : ''}
    ${orphan ? answerFailure(answer) : ''}
    ${problem ? listingFailure(problem, grant !== undefined) : ''}
    ${more ? notice('info', `More approvals wait than the ${MAX_SHOWN} oldest shown here`, 'Answer some, or list them all with matrix-tools approvals (each principal has at most its own share live: maxPendingPerPrincipal).') : ''}
    ${listed === undefined ? '' : listed.length === 0 ? notice('ok', 'Nothing waits for approval') : listed.map((a) => card(a, writes, answer?.approvalId === a.approvalId ? answer : undefined))}`;
  return {
    ...common,
    head,
    live,
    status: failed !== undefined ? statusOf(failed.error) : problem ? statusOf(problem) : 200,
  };
}

/**
 * Why the list is missing. Refused for want of a grant, the page says how to give it one: only
 * where the service trusts issuers is one needed (in development anyone may list).
 */
function listingFailure(problem: unknown, hasGrant: boolean): SafeHtml {
  if (!hasGrant && problem instanceof MatrixError && problem.code === ErrorCode.Forbidden)
    return notice(
      'info',
      'This console has no approver grant',
      html`The service trusts issuers: only a grant with nats.approve may list and answer approvals. Paste one above (<code>matrix-tools grant … --approve-tools "*"</code>), or start the console with <code>--approver-grant FILE</code>. (${problem.message})`,
    );
  return errorNotice(problem, 'Listing the pending approvals failed');
}

/** A refused answer, marked so that the page's refreshes keep it where the person clicked (console.js). */
function answerFailure(answer: Required<Failed>): SafeHtml {
  return html`<div data-failed="${`approval:${answer.approvalId}`}">${errorNotice(answer.error, 'The answer was not taken')}</div>`;
}

/**
 * The page without the token: pending approvals carry the calls' whole arguments, so they are
 * listed only to whoever holds the token the console printed (a read-only console has none, and
 * lists none), never to anyone who can merely reach the port.
 */
function tokenNeeded(writes: boolean, signIn: boolean): Pick<Page, 'live' | 'status' | 'withoutToken'> {
  const signInLink = html`<a href="${href('/signin', { return: SECTION })}">Sign in</a>`;
  return {
    status: 401,
    withoutToken: true,
    live: writes
      ? notice(
          'info',
          'Paste the token to see the pending approvals',
          html`They carry the calls’ whole arguments, so this page lists them only with the token the console printed at start (the field at the top right)${signIn ? html`, or to a person signed in: ${signInLink}` : ''}.`,
        )
      : signIn
        ? notice(
            'info',
            'Sign in to see the pending approvals',
            html`They carry the calls’ whole arguments, so this page lists them only to a person signed in through the identity provider: ${signInLink}.`,
          )
        : notice(
            'info',
            'This console is read-only, and lists no approvals',
            'They carry the calls’ whole arguments: start it with --allow-writes, then paste the token it prints, to list and answer them. Or use matrix-tools approvals.',
          ),
  };
}

/** `POST /approvals/answer`: approve or reject one; back to the list, which says what happened. */
export async function answerApproval(request: ConsoleRequest): Promise<Page | Redirect> {
  const { form, deps } = request;
  const approvalId = form.get('approvalId') ?? '';
  const decision = form.get('decision');
  const reason = form.get('reason')?.trim();
  let outcome: AnswerReply;
  try {
    if (decision !== 'approve' && decision !== 'reject') throw new FormError('choose Approve or Reject');
    if (decision === 'reject' && !reason) throw new FormError('a reject needs a reason: the model reads it');
    outcome = await deps.client.request<AnswerReply>(
      Mounts.Approvals,
      ApprovalOp.Answer,
      { approvalId, decision, ...(reason ? { reason } : {}) },
      { timeoutMs: TIMEOUT_MS, ...actingGrant(request) },
    );
  } catch (error) {
    return approvalsPage(request, { error, approvalId, reason: form.get('reason') ?? '' });
  }
  const { by, decidedAt } = outcome as AnswerReply;
  return { redirect: href(SECTION, { answered: approvalId, decision, by, at: decidedAt }) };
}

/** `POST /approvals/grant`: keeps the pasted approver grant in the console's memory (empty: forget it). */
export async function keepApproverGrant(request: ConsoleRequest): Promise<Page | Redirect> {
  const text = request.form.get('grant')?.trim() ?? '';
  // The grant's text only: a path here would have the console read its own files for the page.
  if (text !== '' && !GRANT_TEXT.test(text))
    return approvalsPage(request, {
      error: new FormError('that is not a grant: paste the JWT itself (three base64url parts)'),
    });
  request.deps.approver.grant = text === '' ? undefined : text;
  return { redirect: SECTION };
}

const GRANT_TEXT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/** Most approvals the page lists (the oldest); past it the page says more wait. */
const MAX_SHOWN = 1000;

async function pendingOf(request: ConsoleRequest): Promise<{ listed: PendingApproval[]; more: boolean }> {
  const all: PendingApproval[] = [];
  let cursor: string | undefined;
  do {
    const page = await request.deps.client.request<PendingReply>(
      Mounts.Approvals,
      ApprovalOp.Pending,
      { limit: 200, ...(cursor ? { cursor } : {}) },
      { timeoutMs: TIMEOUT_MS, ...actingGrant(request) },
    );
    all.push(...page.approvals);
    cursor = page.nextCursor;
  } while (cursor !== undefined && all.length < MAX_SHOWN);
  return { listed: all, more: cursor !== undefined };
}

function grantForm(has: boolean, failed: unknown): SafeHtml {
  return html`<form method="post" action="${SECTION}/grant" data-write class="card fields" id="grant-form">
    ${failed === undefined ? '' : errorNotice(failed, 'The grant was not taken')}
    <label>approver grant <span class="hint">${has ? 'one is set; paste another to replace it, or save empty to forget it' : 'a grant with nats.approve, sent as Matrix-Grant with $pending and $answer'}</span><textarea name="grant" rows="2" autocomplete="off"></textarea></label>
    <div class="row"><button type="submit" class="secondary">Use this grant</button></div></form>`;
}

function card(a: PendingApproval, writes: boolean, failed: Required<Failed> | undefined): SafeHtml {
  const disabled = writes ? '' : html`disabled`;
  return html`<div class="card approval" data-approval-id="${a.approvalId}" data-slot="${`approval:${a.approvalId}`}">
    <h2><span class="mono">${a.tool}</span> → <span class="mono">${a.target} ${a.op}</span> ${badge(`${left(a.expiresAt)} left`, 'warn')}</h2>
    <p class="muted">asked by <strong>${a.principal ?? 'an unnamed caller'}</strong>${a.session ? html` in session <span class="mono">${a.session}</span>` : ''} at <span class="mono">${a.requestedAt}</span> · call <span class="mono">${a.callId}</span> · <span class="mono">${a.approvalId}</span></p>
    ${a.truncated ? notice('info', `Arguments cut: ${a.argumentsBytes} characters of JSON, the first 16384 shown`, 'If what you cannot see matters, reject.') : ''}
    <pre class="json">${printable(typeof a.arguments === 'string' ? a.arguments : JSON.stringify(a.arguments, null, 2))}</pre>
    <form method="post" action="${SECTION}/answer" data-write class="row answer">
      <input type="hidden" name="approvalId" value="${a.approvalId}">
      <input name="reason" value="${failed?.reason ?? ''}" placeholder="reason (a reject needs one)" aria-label="reason" autocomplete="off">
      <button type="submit" name="decision" value="approve" ${disabled}>Approve</button>
      <button type="submit" name="decision" value="reject" class="secondary" ${disabled}>Reject</button>
    </form>${failed === undefined ? '' : answerFailure(failed)}</div>`;
}
