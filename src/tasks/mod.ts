/** Tool calls that outlive one request (PROTOCOL 9): the store, the runner and the `system.tasks` mount. */
export { TaskRunner, type TaskRunnerOptions } from './runner.js';
export { isTaskId, newTaskId, TASKS_BUCKET, TaskStore, type TaskStoreOptions } from './store.js';
export { TASKS_VERSION, type TasksMountOptions, tasksMount } from './system-tasks.js';
export {
  DEFAULT_TASK_TTL_MS,
  isTerminal,
  MAX_LIVE_TASKS_PER_PRINCIPAL,
  MAX_RESULT_WAIT_MS,
  MAX_TASK_TTL_MS,
  type Task,
  type TaskListReply,
  type TaskListRequest,
  type TaskRecord,
  type TaskRef,
  type TaskRequest,
  type TaskResultRequest,
  TaskStatus,
} from './types.js';
