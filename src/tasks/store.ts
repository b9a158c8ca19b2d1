/**
 * The task store: one KV key per task, `<owner>.<taskId>`, in bucket `matrix-tasks` (which also
 * holds the live-task slots, `slot.<principal>.<n>`: src/tasks/slots.ts). Every
 * change is a compare-and-set on the key's revision (`transition`), so two instances never both
 * move a task on. Where the server has per-message TTL each write carries the time to the task's
 * `expiresAt` and the server removes it then; elsewhere the runner's sweeper removes each task
 * past its own `expiresAt`. The bucket's `max_age` (the longest `ttlMs`, plus an hour) drops
 * anything forgotten.
 */
import { randomBytes } from 'node:crypto';
import type { NatsConnection } from '@nats-io/nats-core';
import { decodeBody, encodeBody, holdsBytes, jsonOf, sha256Hex } from '../bus/codec.js';
import { ConflictError } from '../bus/errors.js';
import { Bucket, type BucketEntry, type BucketWatch } from '../bus/kv.js';
import type { ToolCall } from '../dispatcher/types.js';
import { isSlotKey } from './slots.js';
import { MAX_TASK_TTL_MS, TASKS_BUCKET_MAX_BYTES, type TaskRecord } from './types.js';

/** How long the marker of an expired task is kept, in ms: a minute (markers take room in the bucket). */
export const TASK_MARKER_TTL_MS = 60_000;

/** The bucket of tasks. */
export const TASKS_BUCKET = 'matrix-tasks';

/** How many times a transition reads again after losing a compare-and-set before it gives up. */
const MAX_TRIES = 8;

/** A task record with the KV revision it was read at. */
export interface StoredTask {
  key: string;
  record: TaskRecord;
  revision: number;
  /** Bytes it takes in the bucket: its key and its value. */
  bytes: number;
}

/** What a transition does with the record it read: a new record to write, or undefined to leave it. */
export type Change = (record: TaskRecord) => TaskRecord | undefined;

/** How the store is opened. */
export interface TaskStoreOptions {
  /** Bucket name; default `matrix-tasks`. */
  bucket?: string;
  /** JetStream replicas; default 1 (`MATRIX_TOOLS_REPLICAS` in the service). */
  replicas?: number;
  /** Most bytes the bucket holds; default `TASKS_BUCKET_MAX_BYTES` (256 MiB). */
  maxBytes?: number;
}

/** A task id: 128 random bits, base64url (22 characters). */
export function newTaskId(): string {
  return randomBytes(16).toString('base64url');
}

const TASK_ID = /^[A-Za-z0-9_-]{22}$/;

/** Is `taskId` shaped as this store makes them (then it is also a valid key token)? */
export function isTaskId(taskId: string): boolean {
  return TASK_ID.test(taskId);
}

/** The key token of an owner: its principal and session, hashed (they may hold characters no key may). */
export function ownerToken(owner: { principal?: string; session?: string }): string {
  return sha256Hex(`${owner.principal ?? ''}\u0000${owner.session ?? ''}`).slice(0, 32);
}

/** The key of a task of `owner`. */
export function taskKey(owner: { principal?: string; session?: string }, taskId: string): string {
  return `${ownerToken(owner)}.${taskId}`;
}

/** Tasks in a KV bucket. */
export class TaskStore {
  private constructor(
    readonly bucket: Bucket,
    /** Most bytes the bucket holds. */
    readonly maxBytes: number,
  ) {}

  static async open(nc: NatsConnection, options: TaskStoreOptions = {}): Promise<TaskStore> {
    const maxBytes = options.maxBytes ?? TASKS_BUCKET_MAX_BYTES;
    const bucket = await Bucket.open(nc, options.bucket ?? TASKS_BUCKET, {
      replicas: options.replicas ?? 1,
      history: 1,
      maxAgeMs: MAX_TASK_TTL_MS + 3_600_000,
      maxBytes,
      expiring: true,
      // Each task's key is used once: its marker matters only to a watch that was away, and a
      // principal making short tasks in a loop would otherwise fill the bucket with them.
      markerTtlMs: TASK_MARKER_TTL_MS,
    });
    return new TaskStore(bucket, maxBytes);
  }

  /** Writes a new task, encoded as `value`; `ConflictError` if its key exists (a task id drawn twice). */
  async create(key: string, record: TaskRecord, value = encodeTask(record)): Promise<StoredTask> {
    const revision = await this.bucket.create(key, value, record.expiresAt - Date.now());
    return { key, record, revision, bytes: key.length + value.length };
  }

  /** The task at `key`, or undefined. */
  async get(key: string): Promise<StoredTask | undefined> {
    const entry = await this.bucket.get(key);
    if (entry === null) return undefined;
    const record = decode(entry.value);
    return record === undefined
      ? undefined
      : { key, record, revision: entry.revision, bytes: key.length + entry.value.length };
  }

  /**
   * Applies `change` to the task at `key` with compare-and-set, reading again when someone else
   * wrote first. Starts from `known` when given (no read). Resolves with the task as stored after
   * (unchanged when `change` left it), or undefined when there is no such task.
   */
  async transition(key: string, change: Change, known?: StoredTask): Promise<StoredTask | undefined> {
    let current = known ?? (await this.get(key));
    for (let tries = 0; current !== undefined; tries++) {
      const next = change(current.record);
      if (next === undefined) return current;
      try {
        const value = encodeTask(next);
        const revision = await this.bucket.update(key, value, current.revision, next.expiresAt - Date.now());
        return { key, record: next, revision, bytes: key.length + value.length };
      } catch (err) {
        if (!(err instanceof ConflictError) || tries >= MAX_TRIES) throw err;
      }
      current = await this.get(key);
    }
    return undefined;
  }

  /** Removes the task at `key` if it is still at `revision`. */
  async remove(key: string, revision: number): Promise<void> {
    await this.bucket.delete(key, revision).catch((err: unknown) => {
      if (!(err instanceof ConflictError)) throw err;
    });
  }

  /** The keys of `owner`'s tasks. */
  keysOf(owner: { principal?: string; session?: string }): Promise<string[]> {
    return this.bucket.keys(`${ownerToken(owner)}.*`);
  }

  /**
   * Every task now, then every change (a removed task comes with `record` undefined), with the
   * bytes it takes in the bucket; the live-task slots the bucket also holds (src/tasks/slots.ts)
   * go to `onSlot`.
   */
  watch(
    onTask: (key: string, record: TaskRecord | undefined, revision: number, bytes: number) => void,
    onSlot: (entry: BucketEntry) => void = () => {},
  ): BucketWatch {
    return this.bucket.watch((entry: BucketEntry) => {
      if (isSlotKey(entry.key)) return onSlot(entry);
      const record = entry.operation === 'PUT' ? decode(entry.value) : undefined;
      onTask(entry.key, record, entry.revision, entry.key.length + entry.value.length);
    });
  }
}

/**
 * A task record as the bucket holds it (its length is what it costs its principal's share): JSON,
 * where bytes have no form of their own (left to JSON.stringify a `Uint8Array` is an object of
 * one key per byte, ten times its size). The call's arguments and the result's `structured`,
 * when they hold bytes, are kept as their MessagePack in base64 (`argumentsPacked`,
 * `structuredPacked`) and read back as they were; bytes anywhere else are their base64 text.
 */
export function encodeTask(record: TaskRecord): Uint8Array {
  let stored: StoredRecord = record;
  if (holdsBytes(record.call.arguments)) {
    const { arguments: args, ...call } = record.call;
    stored = { ...stored, call: { ...call, argumentsPacked: packed(args) } };
  }
  if (record.result !== undefined && holdsBytes(record.result.structured)) {
    const { structured, ...result } = record.result;
    stored = { ...stored, result: { ...result, structuredPacked: packed(structured) } };
  }
  return Buffer.from(jsonOf(stored));
}

/** A record as JSON holds it: `encodeTask`'s packed fields in place of those holding bytes. */
type StoredRecord = Omit<TaskRecord, 'call' | 'result'> & {
  call: TaskRecord['call'] & { argumentsPacked?: string };
  result?: TaskRecord['result'] & { structuredPacked?: string };
};

function packed(value: unknown): string {
  return Buffer.from(encodeBody(value)).toString('base64');
}

function unpacked(text: string): unknown {
  return decodeBody(Buffer.from(text, 'base64'));
}

function decode(value: Uint8Array): TaskRecord | undefined {
  try {
    const stored = JSON.parse(
      Buffer.from(value.buffer, value.byteOffset, value.length).toString('utf8'),
    ) as StoredRecord;
    const { argumentsPacked, ...call } = stored.call;
    if (argumentsPacked !== undefined)
      stored.call = { ...call, arguments: unpacked(argumentsPacked) as ToolCall['arguments'] };
    if (stored.result?.structuredPacked !== undefined) {
      const { structuredPacked, ...result } = stored.result;
      stored.result = { ...result, structured: unpacked(structuredPacked) };
    }
    return stored;
  } catch {
    return undefined;
  }
}
