/**
 * The tasks one instance knows of from its watch of the bucket: by key, by owner (what `$list`
 * pages from, with no bucket read), and what each principal keeps (records, bytes, live ones),
 * counting those being written here from their check against the bounds on. A live task is
 * held whole (a takeover runs it); a finished one only as its index entry: its `Task`, owner,
 * expiry and size, never its result (`$result` reads that from the bucket).
 */
import { ownerToken, type StoredTask } from './store.js';
import { isTerminal, type TaskRecord } from './types.js';

/** A known task: as stored, a finished one cut to its index entry. */
export type KnownTask = StoredTask;

/** What one principal keeps in the bucket. */
export interface Kept {
  /** Task records, live and finished. */
  records: number;
  /** Their bytes. */
  bytes: number;
  /** Of them, the live ones. */
  live: number;
}

/** Known tasks (terminal ones too, until removed) and the creations in progress here. */
export class KnownTasks {
  private readonly byKey = new Map<string, KnownTask>();
  /** The same tasks by owner token (the key's first token), then key. */
  private readonly byOwner = new Map<string, Map<string, KnownTask>>();
  /** What each principal keeps, those being written here included. */
  private readonly kept = new Map<string | undefined, Kept>();
  /** Bytes of every known task, those being written here included. */
  private bytes = 0;

  /** The task at `key`, as last heard. */
  get(key: string): KnownTask | undefined {
    return this.byKey.get(key);
  }

  /** Every known task. */
  values(): IterableIterator<KnownTask> {
    return this.byKey.values();
  }

  /** Knows the task as stored; a finished one as its index entry. */
  remember(stored: StoredTask): void {
    this.forget(stored.key);
    const known: KnownTask = { ...stored, record: indexed(stored.record) };
    this.byKey.set(known.key, known);
    const token = ownerOf(known.key);
    let tasks = this.byOwner.get(token);
    if (tasks === undefined) this.byOwner.set(token, (tasks = new Map()));
    tasks.set(known.key, known);
    this.count(known.record, 1, known.bytes);
  }

  /** Forgets a removed task. */
  forget(key: string): void {
    const known = this.byKey.get(key);
    if (known === undefined) return;
    this.byKey.delete(key);
    const token = ownerOf(key);
    const tasks = this.byOwner.get(token);
    tasks?.delete(key);
    if (tasks?.size === 0) this.byOwner.delete(token);
    this.count(known.record, -1, -known.bytes);
  }

  /** The tasks of `owner`, in no order. */
  ofOwner(owner: TaskRecord['owner']): KnownTask[] {
    const tasks = this.byOwner.get(ownerToken(owner));
    return tasks === undefined ? [] : [...tasks.values()];
  }

  /** What a principal keeps, those being written here included. */
  keptBy(principal: string | undefined): Kept {
    return { ...(this.kept.get(principal) ?? { records: 0, bytes: 0, live: 0 }) };
  }

  /** Bytes of every known task, those being written here included. */
  totalBytes(): number {
    return this.bytes;
  }

  /**
   * Counts one more live task of `principal`, `bytes` long, until the returned release is
   * called: taken synchronously after the check against the bounds, so concurrent calls cannot
   * all pass it.
   */
  reserve(principal: string | undefined, bytes: number): () => void {
    this.add(principal, { records: 1, bytes, live: 1 });
    return () => this.add(principal, { records: -1, bytes: -bytes, live: -1 });
  }

  private count(record: TaskRecord, sign: 1 | -1, bytes: number): void {
    const live = isTerminal(record.task.status) ? 0 : sign;
    this.add(record.owner.principal, { records: sign, bytes, live });
  }

  private add(principal: string | undefined, delta: Kept): void {
    const k = this.kept.get(principal) ?? { records: 0, bytes: 0, live: 0 };
    k.records += delta.records;
    k.bytes += delta.bytes;
    k.live += delta.live;
    this.bytes += delta.bytes;
    if (k.records <= 0) this.kept.delete(principal);
    else this.kept.set(principal, k);
  }
}

/** What is held of a record: a live one whole, a finished one without its result. */
function indexed(record: TaskRecord): TaskRecord {
  if (!isTerminal(record.task.status)) return record;
  const { result: _result, ...entry } = record;
  return entry;
}

/** The owner token of a task key (`<owner>.<taskId>`). */
function ownerOf(key: string): string {
  return key.slice(0, key.indexOf('.'));
}
