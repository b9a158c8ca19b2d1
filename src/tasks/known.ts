/**
 * The tasks one instance knows of from its watch of the bucket: by key, by owner (what `$list`
 * pages from, with no bucket read), and the live ones each principal holds, counting those being
 * written here from their check against the cap on.
 */
import { ownerToken, type StoredTask } from './store.js';
import { isTerminal, type TaskRecord } from './types.js';

/** Known tasks (terminal ones too, until removed) and the creations in progress here. */
export class KnownTasks {
  private readonly byKey = new Map<string, StoredTask>();
  /** The same tasks by owner token (the key's first token), then key. */
  private readonly byOwner = new Map<string, Map<string, StoredTask>>();
  /** Tasks being written here, by principal: live from their check until their write lands or fails. */
  private readonly reserved = new Map<string | undefined, number>();

  /** The task at `key`, as last heard. */
  get(key: string): StoredTask | undefined {
    return this.byKey.get(key);
  }

  /** Every known task. */
  values(): IterableIterator<StoredTask> {
    return this.byKey.values();
  }

  /** Knows the task as stored. */
  remember(stored: StoredTask): void {
    this.byKey.set(stored.key, stored);
    const token = ownerOf(stored.key);
    let tasks = this.byOwner.get(token);
    if (tasks === undefined) this.byOwner.set(token, (tasks = new Map()));
    tasks.set(stored.key, stored);
  }

  /** Forgets a removed task. */
  forget(key: string): void {
    this.byKey.delete(key);
    const token = ownerOf(key);
    const tasks = this.byOwner.get(token);
    tasks?.delete(key);
    if (tasks?.size === 0) this.byOwner.delete(token);
  }

  /** The tasks of `owner`, in no order. */
  ofOwner(owner: TaskRecord['owner']): StoredTask[] {
    const tasks = this.byOwner.get(ownerToken(owner));
    return tasks === undefined ? [] : [...tasks.values()];
  }

  /** Live tasks of a principal, those being written here included. */
  liveOf(principal: string | undefined): number {
    let n = this.reserved.get(principal) ?? 0;
    for (const { record } of this.byKey.values())
      if (record.owner.principal === principal && !isTerminal(record.task.status)) n++;
    return n;
  }

  /**
   * Counts one more task of `principal` as live until the returned release is called: taken
   * synchronously after the check against the cap, so concurrent calls cannot all pass it.
   */
  reserve(principal: string | undefined): () => void {
    this.reserved.set(principal, (this.reserved.get(principal) ?? 0) + 1);
    return () => {
      const left = (this.reserved.get(principal) ?? 1) - 1;
      if (left > 0) this.reserved.set(principal, left);
      else this.reserved.delete(principal);
    };
  }
}

/** The owner token of a task key (`<owner>.<taskId>`). */
function ownerOf(key: string): string {
  return key.slice(0, key.indexOf('.'));
}
