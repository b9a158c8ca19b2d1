/**
 * `system.tasks` (PROTOCOL 9): `$get`, `$result`, `$cancel` and `$list` of the caller's own
 * tasks, answered by any instance from KV `matrix-tasks` (`$list` from the runner's index of it,
 * kept by watching the bucket). A task belongs to the principal and
 * session of the grant that made it: anyone else is told `not_found`, never `forbidden`. A grant
 * bound to its holder (`nats.inbox`) holds here only for that holder's replies: a copy of it
 * sent by another NATS user is refused `wrong_holder` before its body is read.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { SchemaId } from '../bus/contracts.js';
import { NotFoundError } from '../bus/errors.js';
import type { Logger } from '../bus/log.js';
import { Mount, type OpContext } from '../bus/mount.js';
import { Mounts } from '../bus/subjects.js';
import type { ToolResult } from '../dispatcher/types.js';
import { IdentityGate } from '../identity/gate.js';
import type { TaskRunner } from './runner.js';
import { isTaskId, type StoredTask } from './store.js';
import {
  isTerminal,
  type Task,
  type TaskListReply,
  type TaskListRequest,
  type TaskRecord,
  type TaskRef,
  type TaskResultRequest,
} from './types.js';

/** Version of the tasks mount. */
export const TASKS_VERSION = '0.1.0';
/** Tasks in a `$list` page unless the request says. */
const DEFAULT_PAGE = 50;
/** The most tasks in a `$list` page, whatever the request says (its contract says the same). */
const MAX_PAGE = 200;

/** How to mount `system.tasks`. */
export interface TasksMountOptions {
  runner: TaskRunner;
  identity?: IdentityGate;
  logger?: Logger;
}

/** Builds the `system.tasks` mount (call `start()` on it). */
export function tasksMount(nc: NatsConnection, options: TasksMountOptions): Mount {
  const { runner } = options;
  const identity = options.identity ?? IdentityGate.trustingCallers();
  /** The caller's task, or `not_found` (unknown, malformed, or someone else's). */
  const ownTask = async (taskId: string, ctx: OpContext): Promise<StoredTask> => {
    const owner = identity.owner(ctx);
    const found = isTaskId(taskId) ? await runner.get(owner, taskId) : undefined;
    if (found === undefined)
      throw new NotFoundError(`no task ${taskId} of yours: it is unknown, expired, or not yours`);
    return found;
  };
  return new Mount(nc, {
    name: Mounts.Tasks,
    version: TASKS_VERSION,
    description: 'Tool calls running as tasks: their state, results and cancellation, for the caller that made them.',
    logger: options.logger,
    ops: {
      $get: {
        description: 'The task: its status, latest progress and times.',
        request: SchemaId.TaskRef,
        response: SchemaId.Task,
        // The grant, and its holder, before the body is read.
        beforeBody: identity.beforeBody,
        handle: async (request: TaskRef, ctx: OpContext): Promise<Task> =>
          (await ownTask(request.taskId, ctx)).record.task,
      },
      $result: {
        description: 'The ToolResult once the task has ended, else the Task when waitMs (at most 30000) runs out.',
        request: SchemaId.TaskResultRequest,
        response: SchemaId.CallReply,
        // The grant, and its holder, before the body is read.
        beforeBody: identity.beforeBody,
        handle: async (request: TaskResultRequest, ctx: OpContext): Promise<ToolResult | Task> => {
          let found = await ownTask(request.taskId, ctx);
          if (!isTerminal(found.record.task.status) && (request.waitMs ?? 0) > 0) {
            const until = Date.now() + (request.waitMs ?? 0);
            while (!isTerminal(found.record.task.status) && Date.now() < until && !ctx.signal.aborted) {
              if (!(await runner.waitForEnd(found.key, until - Date.now()))) break;
              found = await ownTask(request.taskId, ctx);
            }
          }
          return resultOf(found.record);
        },
      },
      $cancel: {
        description: 'Cancels the task (its target is told to stop); a task that has ended comes back unchanged.',
        request: SchemaId.TaskRef,
        response: SchemaId.Task,
        // The grant, and its holder, before the body is read.
        beforeBody: identity.beforeBody,
        handle: async (request: TaskRef, ctx: OpContext): Promise<Task> => {
          const found = await ownTask(request.taskId, ctx);
          if (isTerminal(found.record.task.status)) return found.record.task;
          return ((await runner.cancel(found)) ?? found).record.task;
        },
      },
      $list: {
        description: 'Your tasks, newest first, a page at a time (cursor), optionally of one status.',
        request: SchemaId.TaskListRequest,
        response: SchemaId.TaskListReply,
        // The grant, and its holder, before the body is read.
        beforeBody: identity.beforeBody,
        handle: (request: TaskListRequest, ctx: OpContext): TaskListReply => {
          // From the runner's index of the bucket (it watches it): no bucket read per call.
          const tasks = runner
            .tasksOf(identity.owner(ctx))
            .map((t) => t.record.task)
            .filter((t) => request.status === undefined || t.status === request.status)
            .sort((a, b) => cmp(cursorOf(b), cursorOf(a)));
          const cursor = request.cursor;
          const from = cursor === undefined ? 0 : tasks.findIndex((t) => cursorOf(t) < cursor);
          const start = from < 0 ? tasks.length : from;
          const limit = Math.min(request.limit ?? DEFAULT_PAGE, MAX_PAGE);
          const page = tasks.slice(start, start + limit);
          const reply: TaskListReply = { tasks: page };
          const last = page[page.length - 1];
          if (start + limit < tasks.length && last !== undefined) reply.nextCursor = cursorOf(last);
          return reply;
        },
      },
    },
  });
}

/** What `$result` answers: the stored result of a terminal task, else the task. */
function resultOf(record: TaskRecord): ToolResult | Task {
  return isTerminal(record.task.status) && record.result !== undefined ? record.result : record.task;
}

/** Where a task sits in newest-first order: its creation time, then its id. */
function cursorOf(task: Task): string {
  return `${task.createdAt}|${task.taskId}`;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
