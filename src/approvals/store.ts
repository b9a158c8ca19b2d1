/**
 * The pending approvals, durable in a JetStream KV bucket (`matrix-approvals`), one key per
 * call: `call.<hash of principal, session and callId>`. The approval's id is that hash and a
 * fresh nonce, so a call sent again (same principal, session and callId, same arguments) while
 * its approval is pending finds the same approval, and an id from an earlier round of the same
 * call finds nothing. Every change of state is compare-and-set on the key's revision, so the
 * first answer wins and an approval is consumed once.
 *
 * Each record expires at its own `expiresAt`: where the server has per-message TTL (2.11 on) the
 * server removes it then (every write carries the time left as its TTL); on older servers the
 * book's sweeper deletes it. Either way the bucket's `max_age` bounds every record.
 */
import { randomBytes } from 'node:crypto';
import type { NatsConnection } from '@nats-io/nats-core';
import { sha256Hex } from '../bus/codec.js';
import { ConflictError, NotFoundError, PayloadTooLargeError } from '../bus/errors.js';
import { Bucket, type BucketEntry, type BucketWatch } from '../bus/kv.js';
import {
  type Answer,
  type ApprovalRequest,
  ApprovalStatus,
  DEFAULT_APPROVALS_BUCKET,
  type PendingApproval,
  type StoredApproval,
} from './types.js';

/**
 * Longest arguments' JSON a listed pending approval shows in full, in characters (16 KiB); past
 * it a list shows a preview, and `$pending {approvalId}` the whole arguments, which the record keeps.
 */
export const SHOWN_ARGUMENTS_CHARS = 16_384;
/** The longest any approval may stay pending: 24 h. */
export const MAX_PENDING_MS = 24 * 3_600_000;
/** The bucket's `max_age`: past the longest pending time, with an hour to spare. */
const BUCKET_MAX_AGE_MS = MAX_PENDING_MS + 3_600_000;
const KEY_PREFIX = 'call.';
/** An approval's id: 20 hex digits of the call's hash, a dash, 12 of a nonce. */
export const APPROVAL_ID = /^([0-9a-f]{20})-[0-9a-f]{12}$/;

/** A stored approval and the revision it was read at. */
export interface Revisioned {
  record: StoredApproval;
  revision: number;
}

/** How the store's bucket is opened. */
export interface ApprovalStoreOptions {
  /** Bucket name; default `matrix-approvals`. */
  bucket?: string;
  /** Copies a JetStream cluster keeps when this creates the bucket; default 1. */
  replicas?: number;
}

/** The pending approvals of one bucket. */
export class ApprovalStore {
  /**
   * @param maxRecordBytes the largest record the server takes in one message (its `max_payload`),
   *   less room for the message's headers.
   */
  private constructor(
    readonly bucket: Bucket,
    private readonly maxRecordBytes: number,
  ) {}

  /** Opens the bucket, creating it when missing (`max_age` 25 h, one revision per key). */
  static async open(nc: NatsConnection, options: ApprovalStoreOptions = {}): Promise<ApprovalStore> {
    const bucket = await Bucket.open(nc, options.bucket ?? DEFAULT_APPROVALS_BUCKET, {
      replicas: options.replicas ?? 1,
      history: 1,
      maxAgeMs: BUCKET_MAX_AGE_MS,
      expiring: true,
    });
    return new ApprovalStore(bucket, recordRoom(nc));
  }

  /** Does the server remove each record at its `expiresAt` (per-message TTL), so no sweeper need? */
  get expires(): boolean {
    return this.bucket.expires;
  }

  /** Binds to a bucket the approvals mount made (the dispatcher's side); `UnavailableError` when there is none. */
  static async bind(nc: NatsConnection, bucket = DEFAULT_APPROVALS_BUCKET): Promise<ApprovalStore> {
    return new ApprovalStore(await Bucket.bind(nc, bucket), recordRoom(nc));
  }

  /**
   * The approval of a call that asks: the one already live for the same call (pending, or
   * approved and not yet used) when there is one, else a new pending one expiring at
   * `expiresAt` (Unix ms). A live one for the same call id with other arguments, tool or target
   * is a `ConflictError`: it is another call, and it does not ride on that approval. A new one
   * comes with the revision it was written at.
   */
  async ask(
    request: ApprovalRequest,
    expiresAt: number,
    now = Date.now(),
  ): Promise<{ record: StoredApproval; created: boolean; revision?: number }> {
    const hash = callHash(request);
    const key = keyOfCall(request);
    const fresh = newRecord(request, hash, expiresAt, now);
    const bytes = encode(fresh);
    // The record keeps the whole arguments, so that a person can see what they approve.
    if (bytes.length > this.maxRecordBytes)
      throw new PayloadTooLargeError(
        `the call's arguments (${fresh.argumentsBytes} characters of JSON) are more than an approval can keep for a person to see (${this.maxRecordBytes} bytes in all): a gated call must be smaller`,
      );
    for (let attempt = 0; attempt < 3; attempt++) {
      const existing = await this.readAny(key);
      const old = existing?.record;
      if (old !== undefined && isLive(old, now)) {
        if (sameCall(old, fresh)) return { record: old, created: false };
        throw new ConflictError(
          `call ${request.callId} already waits for approval ${old.approvalId} with other arguments or another tool`,
        );
      }
      try {
        const revision =
          existing === undefined
            ? await this.bucket.create(key, bytes, expiresAt - now)
            : await this.bucket.update(key, bytes, existing.revision, expiresAt - now);
        return { record: fresh, created: true, revision };
      } catch (err) {
        // Another instance wrote the key between the read and the write: read it again.
        if (!(err instanceof ConflictError)) throw err;
      }
    }
    throw new ConflictError(`call ${request.callId}'s approval kept changing under this write; send it again`);
  }

  /** The approval of an id, whatever its status; undefined when unknown (or from an earlier round of its call). */
  async get(approvalId: string): Promise<Revisioned | undefined> {
    const hash = APPROVAL_ID.exec(approvalId)?.[1];
    if (hash === undefined) return undefined;
    const found = await this.read(KEY_PREFIX + hash);
    return found?.record.approvalId === approvalId ? found : undefined;
  }

  /**
   * Answers a pending approval: the first answer wins. Unknown or expired → `NotFoundError`;
   * already answered (or answered by someone else meanwhile) → `ConflictError`.
   */
  async answer(
    approvalId: string,
    decision: Answer,
    by: string,
    reason: string | undefined,
    now = Date.now(),
  ): Promise<StoredApproval> {
    return this.decide(await this.waiting(approvalId, undefined, now), decision, by, reason, now);
  }

  /**
   * The approval `approvalId` while it still waits for an answer, read from the bucket:
   * `NotFoundError` when unknown, expired or not `visible` to the caller (as if unknown),
   * `ConflictError` (who answered, when) once answered.
   */
  async waiting(
    approvalId: string,
    visible: (record: StoredApproval) => boolean = () => true,
    now = Date.now(),
  ): Promise<Revisioned> {
    const found = await this.get(approvalId);
    if (found === undefined || Date.parse(found.record.expiresAt) <= now || !visible(found.record))
      throw new NotFoundError(`no pending approval ${approvalId}: it is unknown or it expired`);
    if (found.record.status !== ApprovalStatus.Pending) throw alreadyDecided(found.record);
    return found;
  }

  /** Answers the approval read as `found` (the caller has checked who may); see `answer`. */
  async decide(
    found: Revisioned,
    decision: Answer,
    by: string,
    reason: string | undefined,
    now = Date.now(),
  ): Promise<StoredApproval> {
    const old = found.record;
    if (old.status !== ApprovalStatus.Pending) throw alreadyDecided(old);
    const record: StoredApproval = {
      ...old,
      status: decision === 'approve' ? ApprovalStatus.Approved : ApprovalStatus.Rejected,
      by,
      decidedAt: new Date(now).toISOString(),
    };
    if (reason !== undefined) record.reason = reason;
    try {
      await this.bucket.update(keyOf(old), encode(record), found.revision, timeLeft(old, now));
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      const now2 = await this.get(old.approvalId);
      throw now2 === undefined
        ? new NotFoundError(`approval ${old.approvalId} expired meanwhile`)
        : alreadyDecided(now2.record);
    }
    return record;
  }

  /**
   * Marks an approved approval used (compare-and-set): true for the one call that may go ahead,
   * false for any other.
   */
  async consume(found: Revisioned): Promise<boolean> {
    if (found.record.status !== ApprovalStatus.Approved) return false;
    const record: StoredApproval = { ...found.record, status: ApprovalStatus.Consumed };
    try {
      await this.bucket.update(keyOf(found.record), encode(record), found.revision, timeLeft(found.record));
      return true;
    } catch (err) {
      if (err instanceof ConflictError) return false;
      throw err;
    }
  }

  /**
   * Removes an approval still as it was read (a pending one nobody answered in time); false when it
   * changed meanwhile.
   */
  async remove(found: Revisioned): Promise<boolean> {
    try {
      await this.bucket.delete(keyOf(found.record), found.revision);
      return true;
    } catch (err) {
      if (err instanceof ConflictError) return false;
      throw err;
    }
  }

  /**
   * Every record now and each change after (a delete, or bytes that are no record, as
   * `undefined`), in order, with the bucket revision of each; survives server restarts.
   * `expired` is true for the server's marker of a record its TTL removed.
   */
  watch(
    onChange: (key: string, found: Revisioned | undefined, revision: number, expired: boolean) => void,
    onError?: (err: unknown) => void,
  ): BucketWatch {
    return this.bucket.watch((entry: BucketEntry) => {
      const record = entry.operation === 'PUT' ? decode(entry.value) : undefined;
      onChange(
        entry.key,
        record === undefined ? undefined : { record, revision: entry.revision },
        entry.revision,
        entry.operation === 'PURGE',
      );
    }, onError);
  }

  /** The sequence of the bucket's newest change (0 when empty): a watch has caught up once it delivered it. */
  lastRevision(): Promise<number> {
    return this.bucket.lastRevision();
  }

  private async read(key: string): Promise<Revisioned | undefined> {
    const found = await this.readAny(key);
    return found?.record === undefined ? undefined : (found as Revisioned);
  }

  /** The key's entry, its record undefined when the bytes are not one (then it is written over). */
  private async readAny(key: string): Promise<{ record: StoredApproval | undefined; revision: number } | undefined> {
    const entry = await this.bucket.get(key);
    return entry === null ? undefined : { record: decode(entry.value), revision: entry.revision };
  }
}

/** Is an approval still able to let its call run: pending or approved-unused, and not expired? */
export function isLive(record: StoredApproval, now = Date.now()): boolean {
  return (
    (record.status === ApprovalStatus.Pending || record.status === ApprovalStatus.Approved) &&
    Date.parse(record.expiresAt) > now
  );
}

/**
 * A stored approval as `$pending` shows it (the stored fields of state left out): in a list, its
 * arguments up to `SHOWN_ARGUMENTS_CHARS` of JSON, else that much of their JSON as a preview
 * (`truncated`); `whole`, as the call carried them.
 */
export function listed(record: StoredApproval, whole = false): PendingApproval {
  const shown: PendingApproval = {
    approvalId: record.approvalId,
    callId: record.callId,
    tool: record.tool,
    target: record.target,
    op: record.op,
    arguments: record.arguments,
    argumentsDigest: record.argumentsDigest,
    argumentsBytes: record.argumentsBytes,
    requestedAt: record.requestedAt,
    expiresAt: record.expiresAt,
  };
  if (!whole && record.argumentsBytes > SHOWN_ARGUMENTS_CHARS) {
    shown.arguments = preview(record.arguments);
    shown.truncated = true;
  } else if (record.truncated) shown.truncated = true;
  if (record.session !== undefined) shown.session = record.session;
  if (record.principal !== undefined) shown.principal = record.principal;
  return shown;
}

/** The time a record has left until its `expiresAt`, in ms (the TTL a write of it carries). */
function timeLeft(record: StoredApproval, now = Date.now()): number {
  return Date.parse(record.expiresAt) - now;
}

function alreadyDecided(record: StoredApproval): ConflictError {
  const what = record.status === ApprovalStatus.Rejected ? 'rejected' : 'approved';
  return new ConflictError(
    `approval ${record.approvalId} was already ${what}${record.by ? ` by ${record.by}` : ''}${record.decidedAt ? ` at ${record.decidedAt}` : ''}: the first answer counts`,
  );
}

/** The call's part of its approval's id: who, in which session, which call id. */
function callHash(request: ApprovalRequest): string {
  return sha256Hex(`${request.principal ?? ''}\n${request.session ?? ''}\n${request.callId}`).slice(0, 20);
}

/** The bucket key a call's approval is stored under (one per principal, session and call id). */
export function keyOfCall(request: ApprovalRequest): string {
  return KEY_PREFIX + callHash(request);
}

function keyOf(record: StoredApproval): string {
  return KEY_PREFIX + record.approvalId.slice(0, 20);
}

function newRecord(request: ApprovalRequest, hash: string, expiresAt: number, now: number): StoredApproval {
  const text = JSON.stringify(request.arguments);
  const record: StoredApproval = {
    approvalId: `${hash}-${randomBytes(6).toString('hex')}`,
    callId: request.callId,
    tool: request.tool,
    target: request.target,
    op: request.op,
    arguments: request.arguments,
    argumentsDigest: sha256Hex(text),
    argumentsBytes: text.length,
    requestedAt: new Date(now).toISOString(),
    expiresAt: new Date(expiresAt).toISOString(),
    status: ApprovalStatus.Pending,
  };
  if (request.session !== undefined) record.session = request.session;
  if (request.principal !== undefined) record.principal = request.principal;
  return record;
}

/** The first `SHOWN_ARGUMENTS_CHARS` of arguments' JSON (arguments that are a preview already, as they are). */
function preview(args: StoredApproval['arguments']): string {
  return typeof args === 'string' ? args : JSON.stringify(args).slice(0, SHOWN_ARGUMENTS_CHARS);
}

/**
 * The record as a mirror keeps it in memory: arguments past `SHOWN_ARGUMENTS_CHARS` of JSON as
 * their preview (`truncated`), so live approvals cost memory by their count, not by what their
 * calls carry; the bucket keeps them whole.
 */
export function withPreview(found: Revisioned): Revisioned {
  const record = found.record;
  if (record.truncated || record.argumentsBytes <= SHOWN_ARGUMENTS_CHARS) return found;
  return { record: { ...record, arguments: preview(record.arguments), truncated: true }, revision: found.revision };
}

/** Is the call that asks the very call the stored approval is for? */
function sameCall(a: StoredApproval, b: StoredApproval): boolean {
  return a.argumentsDigest === b.argumentsDigest && a.tool === b.tool && a.target === b.target && a.op === b.op;
}

/** Room for one record in a message of the connection's server: its `max_payload` less 4 KiB for headers. */
function recordRoom(nc: NatsConnection): number {
  return (nc.info?.max_payload ?? 1024 * 1024) - 4096;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function encode(record: StoredApproval): Uint8Array {
  return encoder.encode(JSON.stringify(record));
}

/** A stored record, or undefined when the bytes are not one (stored state is input too). */
function decode(bytes: Uint8Array): StoredApproval | undefined {
  try {
    const value = JSON.parse(decoder.decode(bytes)) as StoredApproval;
    if (
      typeof value?.approvalId !== 'string' ||
      !APPROVAL_ID.test(value.approvalId) ||
      typeof value.expiresAt !== 'string' ||
      !Object.values(ApprovalStatus).includes(value.status)
    )
      return undefined;
    return value;
  } catch {
    return undefined;
  }
}
