/**
 * The running tasks on the Calls page (PROTOCOL 9): those `system.tasks.$list` gives the
 * console's own identity (the signed-in person's access token, else the grant it holds, or none
 * where the service trusts callers: a task is its maker's alone), each with its progress and, on a console that writes, a Cancel button.
 * Cancelling is a write: `--allow-writes` and the token, or a person signed in through the IdP.
 */
import { Mounts } from '../../bus/subjects.js';
import type { Task, TaskListReply } from '../../tasks/types.js';
import { badge, html, type SafeHtml, table } from '../html.js';
import type { ConsoleRequest } from '../types.js';
import { actingGrant, errorNotice } from './common.js';

const TIMEOUT_MS = 5_000;
const LIVE = ['working', 'input_required'] as const;

/** The section of the Calls page that lists the running tasks; empty when there are none. */
export async function runningTasks(request: ConsoleRequest): Promise<SafeHtml> {
  let running: Task[] = [];
  try {
    for (const status of LIVE) {
      const page = await request.deps.client.request<TaskListReply>(
        Mounts.Tasks,
        '$list',
        { status, limit: 200 },
        { timeoutMs: TIMEOUT_MS, ...actingGrant(request) },
      );
      running = running.concat(page.tasks);
    }
  } catch (err) {
    return errorNotice(err, 'system.tasks did not answer');
  }
  if (running.length === 0) return html``;
  running.sort((a, b) => (a.createdAt < b.createdAt ? 1 : -1));
  const writes = request.deps.writes || request.person !== undefined;
  return html`<h2>Running tasks: ${running.length}</h2>
    ${table(
      ['Task', 'Tool', 'Status', 'Progress', 'Started', ''],
      running.map((t) => taskRow(t, writes)),
    )}`;
}

function taskRow(t: Task, writes: boolean): SafeHtml {
  const p = t.progress;
  const done = p === undefined ? '' : `${p.progress}${p.total === undefined ? '' : ` / ${p.total}`}`;
  const bar =
    p?.total !== undefined && p.total > 0
      ? html`<progress max="${p.total}" value="${Math.min(p.progress, p.total)}"></progress>`
      : '';
  const cancel = writes
    ? html`<form method="post" action="/tasks/cancel" data-write><input type="hidden" name="taskId" value="${t.taskId}"><button type="submit" class="secondary">Cancel</button></form>`
    : '';
  return html`<tr data-task-id="${t.taskId}"><td class="mono">${t.taskId}</td><td><strong class="mono">${t.name}</strong></td>
    <td>${badge(t.status, t.status === 'input_required' ? 'warn' : 'info')}${t.statusMessage ? html`<div class="sub">${t.statusMessage}</div>` : ''}</td>
    <td>${bar} <span class="num">${done}</span>${p?.message ? html`<div class="sub">${p.message}</div>` : ''}</td>
    <td class="mono">${t.createdAt}</td><td>${cancel}</td></tr>`;
}

/** `POST /tasks/cancel`'s request: the form's task cancelled; the error when it was not. */
export async function cancelOf(request: ConsoleRequest, taskId: string): Promise<{ error: unknown } | undefined> {
  try {
    await request.deps.client.request<Task>(
      Mounts.Tasks,
      '$cancel',
      { taskId },
      { timeoutMs: TIMEOUT_MS, ...actingGrant(request) },
    );
    return undefined;
  } catch (error) {
    return { error };
  }
}
