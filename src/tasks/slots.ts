/**
 * Live-task slots: the bound on one principal's live tasks, held across every instance. A live
 * task holds one of its principal's `max` slots, a key `slot.<principal token>.<n>` in the tasks
 * bucket, taken with `create` (compare-and-set: of two instances taking slot n at once, one
 * wins), so however many instances run, no more than `max` slots of a principal exist.
 *
 * The slot is written with the task's own expiry (per-message TTL where the server has it), so a
 * slot never outlives its task. The instance that holds the task's lease when it ends deletes the
 * slot; a slot whose task ended or is gone, and that no one deleted (its instance died between
 * the two writes), is deleted by any instance's sweeper after `graceMs`, once a read of the task
 * confirms it.
 *
 * Each instance knows the slots from its watch of the bucket (the same watch as the tasks), and
 * tries a slot it believes free: a taken one costs a failed `create` and a try at another, and
 * when it believes none free it refuses with no write at all.
 */
import { randomInt } from 'node:crypto';
import { sha256Hex } from '../bus/codec.js';
import { ConflictError } from '../bus/errors.js';
import type { Bucket, BucketEntry } from '../bus/kv.js';

/** The first token of every slot key; task keys start with an owner token (hex), never this. */
const SLOT_PREFIX = 'slot.';
/**
 * What a slot's value starts with, before the key of its task: never JSON, so an older instance
 * that decodes every key of the bucket as a task reads a slot as no task.
 */
const VALUE_PREFIX = 'task ';

/** Is `key` a slot's key (not a task's)? */
export function isSlotKey(key: string): boolean {
  return key.startsWith(SLOT_PREFIX);
}

/** A slot taken: its key and the revision it was written at. */
export interface Slot {
  key: string;
  revision: number;
}

/** A slot as the watch last told of it. */
interface Held {
  /** Key of the task that holds it. */
  task: string;
  revision: number;
  /** Unix ms since which this instance has seen its task ended or gone; undefined while live. */
  orphanSince?: number;
}

/** Whether the task a slot names is still live, as far as this instance knows. */
export type TaskLiveness = (taskKey: string) => 'live' | 'ended' | 'unknown';

/** The slots of every principal, as one instance knows them, and the taking and freeing of them. */
export class LiveSlots {
  private readonly held = new Map<string, Held>();
  /** Slot key of each task that holds one. */
  private readonly byTask = new Map<string, string>();
  /** Slots being taken here. */
  private readonly taking = new Set<string>();
  /** Slots a `create` found taken before the watch told of them; cleared by the watch's next word on the key. */
  private readonly lost = new Set<string>();
  /** Slots being freed here. */
  private readonly freeing = new Set<string>();
  /**
   * The revision of each free slot's delete: a slot is taken again by an update at that revision,
   * one write (a `create` on a deleted key reads it first, three).
   */
  private readonly vacated = new Map<string, number>();

  constructor(
    private readonly bucket: Bucket,
    /** Slots per principal: its most live tasks. */
    readonly max: number,
    /** How long a slot's task must be seen ended or gone before the sweeper frees it, in ms. */
    private readonly graceMs: number,
  ) {}

  /** How many of the principal's slots are held or being taken, as far as this instance knows. */
  heldBy(principal: string | undefined): number {
    const token = principalToken(principal);
    let n = 0;
    for (let i = 0; i < this.max; i++) if (!this.isFree(slotKey(token, i))) n++;
    return n;
  }

  /**
   * Takes a free slot of `principal` for the task at `taskKey`, kept `ttlMs` unless freed;
   * resolves with it, or undefined when every slot is held (by this instance's knowledge and by
   * the bucket's word).
   */
  async take(principal: string | undefined, taskKey: string, ttlMs: number): Promise<Slot | undefined> {
    const token = principalToken(principal);
    const value = Buffer.from(`${VALUE_PREFIX}${taskKey}`);
    for (;;) {
      const key = this.pick(token);
      if (key === undefined) return undefined;
      this.taking.add(key);
      try {
        const revision = await this.write(key, value, ttlMs);
        this.hold(key, { task: taskKey, revision });
        return { key, revision };
      } catch (err) {
        if (!(err instanceof ConflictError)) throw err;
        this.lost.add(key);
      } finally {
        this.taking.delete(key);
      }
    }
  }

  /** Frees `slot` (taken for a task that was then not written). */
  free(slot: Slot): Promise<void> {
    return this.remove(slot.key, slot.revision);
  }

  /** Frees the slot of the task at `taskKey`, if it holds one (its lease holder heard it end). */
  async release(taskKey: string): Promise<void> {
    const key = this.byTask.get(taskKey);
    const held = key === undefined ? undefined : this.held.get(key);
    if (key !== undefined && held !== undefined) await this.remove(key, held.revision);
  }

  /** A change of a slot key, from the watch of the bucket. */
  heard(entry: BucketEntry): void {
    const before = this.held.get(entry.key);
    if (before !== undefined && before.revision > entry.revision) return;
    this.lost.delete(entry.key);
    if (entry.operation === 'PUT') {
      this.vacated.delete(entry.key);
      const task = Buffer.from(entry.value).toString('utf8').slice(VALUE_PREFIX.length);
      this.hold(entry.key, { task, revision: entry.revision });
    } else {
      if (before !== undefined && this.byTask.get(before.task) === entry.key) this.byTask.delete(before.task);
      this.held.delete(entry.key);
      this.freeing.delete(entry.key);
      this.vacated.set(entry.key, entry.revision);
    }
  }

  /**
   * Frees slots whose task has been ended or gone for `graceMs` (the instance that held it died
   * before freeing it), once a read of the task (`read`) confirms it; only then, since this
   * instance's watch may be behind the bucket.
   */
  async sweep(liveness: TaskLiveness, read: (taskKey: string) => Promise<'live' | 'ended'>): Promise<void> {
    const now = Date.now();
    for (const [key, held] of [...this.held]) {
      if (liveness(held.task) === 'live') {
        held.orphanSince = undefined;
        continue;
      }
      held.orphanSince ??= now;
      if (now - held.orphanSince < this.graceMs || this.freeing.has(key)) continue;
      if ((await read(held.task)) === 'live') held.orphanSince = undefined;
      else await this.remove(key, held.revision);
    }
  }

  /**
   * Writes a slot that is free: an update at its delete's revision when known, else a create
   * (the key never written, or its delete marker expired); `ConflictError` when it is taken.
   */
  private async write(key: string, value: Uint8Array, ttlMs: number): Promise<number> {
    const vacated = this.vacated.get(key);
    if (vacated !== undefined) {
      try {
        return await this.bucket.update(key, value, vacated, ttlMs);
      } catch (err) {
        if (!(err instanceof ConflictError)) throw err;
      }
    }
    return this.bucket.create(key, value, ttlMs);
  }

  private hold(key: string, held: Held): void {
    const before = this.held.get(key);
    if (before !== undefined && this.byTask.get(before.task) === key) this.byTask.delete(before.task);
    this.held.set(key, held);
    this.byTask.set(held.task, key);
  }

  /** Deletes the slot if it is still at `revision` (else someone freed it, or took it again). */
  private async remove(key: string, revision: number): Promise<void> {
    if (this.freeing.has(key)) return;
    this.freeing.add(key);
    try {
      await this.bucket.delete(key, revision);
    } catch (err) {
      this.freeing.delete(key);
      if (!(err instanceof ConflictError)) throw err;
    }
  }

  /** Is the slot at `key` free as far as this instance knows? */
  private isFree(key: string): boolean {
    return !this.held.has(key) && !this.taking.has(key) && !this.lost.has(key);
  }

  /** A slot of the principal this instance believes free, drawn at random (instances taking at once collide less). */
  private pick(token: string): string | undefined {
    const free: string[] = [];
    for (let i = 0; i < this.max; i++) {
      const key = slotKey(token, i);
      if (this.isFree(key)) free.push(key);
    }
    return free.length === 0 ? undefined : free[randomInt(free.length)];
  }
}

/** The key token of a principal: hashed (it may hold characters no key may). */
function principalToken(principal: string | undefined): string {
  return sha256Hex(`slot\u0000${principal ?? ''}`).slice(0, 32);
}

function slotKey(token: string, n: number): string {
  return `${SLOT_PREFIX}${token}.${n}`;
}
