/**
 * `tasks`, `task <id>`, `cancel <id>`: a caller's own tasks from a shell (PROTOCOL 9), and the
 * follower of `call --task`, which prints the task id, then a progress line on stderr each time
 * the task moves, and the result once it ends. Each sends the caller's identity as `call` does:
 * `--grant` (`Matrix-Grant`), or `--session`/`--principal` where the service trusts callers.
 */
import { type Command, Option } from 'commander';
import type { BusClient } from '../bus/client.js';
import type { CallContext } from '../bus/context.js';
import { Mounts } from '../bus/subjects.js';
import type { ToolResult } from '../dispatcher/types.js';
import type { Task, TaskListReply } from '../tasks/types.js';
import { withConnection } from './config.js';
import { ExitCode, json, type Output, table } from './output.js';
import { verbAction } from './run.js';
import { grantContext } from './session-flags.js';

const TIMEOUT_MS = 10_000;
/** One round of `$result` while following a task, in ms: a progress line at most this often. */
const FOLLOW_ROUND_MS = 1_000;

/** Who asks: the flags every task verb takes. */
export interface TaskCallerArgs {
  grant?: string;
  session?: string;
  principal?: string;
  json?: boolean;
}

/** The context of a task verb's requests. */
export function callerContext(args: TaskCallerArgs, timeoutMs = TIMEOUT_MS): CallContext & { timeoutMs: number } {
  const ctx: CallContext & { timeoutMs: number } = { timeoutMs, ...grantContext(args) };
  if (args.session) ctx.session = args.session;
  if (args.principal) ctx.principal = args.principal;
  return ctx;
}

/** A one-line account of a task: status, progress, message. */
export function taskLine(task: Task): string {
  const p = task.progress;
  const done = p === undefined ? '' : ` ${p.progress}${p.total === undefined ? '' : `/${p.total}`}`;
  const message = p?.message ?? task.statusMessage;
  return `task ${task.taskId} ${task.status}${done}${message === undefined ? '' : ` ${message}`}`;
}

/**
 * Follows a task to its end: a progress line on stderr whenever its status or progress changes,
 * then its result on stdout (the whole `ToolResult` with `--json`). Exits as `call` does.
 */
export async function followTask(client: BusClient, task: Task, ctx: CallContext, out: Output, asJson = false) {
  let last = taskLine(task);
  out.note(last);
  for (;;) {
    const got = await client.request<ToolResult | Task>(
      Mounts.Tasks,
      '$result',
      { taskId: task.taskId, waitMs: FOLLOW_ROUND_MS },
      { ...ctx, timeoutMs: FOLLOW_ROUND_MS + TIMEOUT_MS },
    );
    if ('isError' in got) {
      out.print(asJson ? json(got) : got.content);
      return got.isError ? ExitCode.Failed : ExitCode.Ok;
    }
    const line = taskLine(got);
    if (line !== last) out.note((last = line));
  }
}

/** `tasks`: the caller's tasks, newest first (every page). */
export async function tasks(client: BusClient, args: TaskCallerArgs & { status?: string }, out: Output) {
  const ctx = callerContext(args);
  const listed: Task[] = [];
  let cursor: string | undefined;
  do {
    const body: Record<string, unknown> = { limit: 200 };
    if (cursor !== undefined) body.cursor = cursor;
    if (args.status !== undefined) body.status = args.status;
    const page = await client.request<TaskListReply>(Mounts.Tasks, '$list', body, ctx);
    listed.push(...page.tasks);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  if (args.json) out.print(json({ tasks: listed }));
  else
    out.print(
      table(
        ['ID', 'TOOL', 'STATUS', 'PROGRESS', 'CREATED', 'MESSAGE'],
        listed.map((t) => [
          t.taskId,
          t.name,
          t.status,
          t.progress === undefined
            ? ''
            : `${t.progress.progress}${t.progress.total === undefined ? '' : `/${t.progress.total}`}`,
          t.createdAt,
          t.progress?.message ?? t.statusMessage ?? '',
        ]),
      ),
    );
  return ExitCode.Ok;
}

/** `task <id>`: one task; with `--wait`, follows it to its end and prints its result. */
export async function task(client: BusClient, args: TaskCallerArgs & { id: string; wait?: boolean }, out: Output) {
  const ctx = callerContext(args);
  const found = await client.request<Task>(Mounts.Tasks, '$get', { taskId: args.id }, ctx);
  if (args.wait) return followTask(client, found, ctx, out, args.json);
  out.print(args.json ? json(found) : taskLine(found));
  return ExitCode.Ok;
}

/** `cancel <id>`: cancels the task (its target is told to stop); an ended task is shown unchanged. */
export async function cancel(client: BusClient, args: TaskCallerArgs & { id: string }, out: Output) {
  const found = await client.request<Task>(Mounts.Tasks, '$cancel', { taskId: args.id }, callerContext(args));
  out.print(args.json ? json(found) : taskLine(found));
  return ExitCode.Ok;
}

/** Declares `tasks`, `task` and `cancel`, each with the connection and identity flags. */
export function addTaskCommands(program: Command): void {
  const command = (name: string, description: string) =>
    withConnection(program.command(name).description(description))
      .addOption(
        new Option('--grant <jwt|file>', 'session grant sent as Matrix-Grant: the tasks are its session’s').env(
          'MATRIX_GRANT',
        ),
      )
      .option('--session <id>', 'Matrix-Session (where the service trusts callers)')
      .option('--principal <id>', 'Matrix-Principal (where the service trusts callers)')
      .option('--json', 'print JSON');
  command('tasks', 'your tasks, newest first')
    .option('--status <status>', 'only working, input_required, completed, failed or cancelled')
    .action(verbAction(tasks));
  command('task', 'one task; --wait follows it and prints its result')
    .argument('<id>', 'task id')
    .option('--wait', 'follow it to its end')
    .action(verbAction(task, 'id'));
  command('cancel', 'cancel a task: its target is told to stop')
    .argument('<id>', 'task id')
    .action(verbAction(cancel, 'id'));
}
