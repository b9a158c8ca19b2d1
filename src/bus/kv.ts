/**
 * A JetStream KV bucket as the registry needs it: compare-and-set writes that fail with
 * `ConflictError`, a watch that keeps going through disconnects and server restarts (it resumes
 * from the revision after the last one it delivered), and records that expire by their own TTL
 * where the server has per-message TTL (`expires`).
 */

import {
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  jetstream,
  jetstreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';
import { type KV, Kvm, type KvWatchEntry } from '@nats-io/kv';
import { Empty, headers, type MsgHdrs, type NatsConnection, nanos } from '@nats-io/nats-core';
import { ConflictError, UnavailableError } from './errors.js';
import { jetStreamFeatures } from './server-features.js';

/** The header that marks a KV delete (the KV client's own constant is not exported). */
const KV_OPERATION = 'KV-Operation';
/** The header of a message's own TTL (ADR-43), in seconds with a unit. */
const NATS_TTL = 'Nats-TTL';
/** The header of a compare-and-set write: the key's revision it expects. */
const EXPECTED_REVISION = 'Nats-Expected-Last-Subject-Sequence';
/**
 * How long the server keeps the marker it writes when a record expires (ADR-48 "limit markers"),
 * in ms: a watch that was away for less than this hears the expiry as a `PURGE`.
 */
export const MARKER_TTL_MS = 3_600_000;

/** One change of one key. */
export interface BucketEntry {
  key: string;
  /** The stored bytes (empty for deletes). */
  value: Uint8Array;
  /** The bucket's sequence number of this change. */
  revision: number;
  operation: 'PUT' | 'DEL' | 'PURGE';
}

/** How a bucket is made when it does not exist yet. */
export interface BucketOptions {
  /** Copies kept by a JetStream cluster; default 1. */
  replicas?: number;
  /** Revisions kept per key; default 5. */
  history?: number;
  /** Age past which entries expire, in ms; default never. */
  maxAgeMs?: number;
  /**
   * Most bytes the bucket holds, in bytes; default no bound. Set on a bucket that exists too (an
   * older one made without it): past it JetStream refuses a new key, while a key already there
   * may still be written smaller (history 1 replaces it).
   */
  maxBytes?: number;
  /**
   * Let records expire by their own TTL (the `ttlMs` of a write) where the server has
   * per-message TTL: the bucket is made with `allow_msg_ttl` and limit markers, or an existing
   * one is updated to them. Default false.
   */
  expiring?: boolean;
  /**
   * With `expiring`, how long the marker of an expired record is kept, in ms; default
   * `MARKER_TTL_MS`. Every marker takes room in the bucket, so a bucket whose keys are each used
   * once (tasks) keeps them short.
   */
  markerTtlMs?: number;
}

/** How a watch checks that it is not behind its bucket; defaults for production. */
export interface WatchTiming {
  /** How often to check, in ms; default 2000. */
  checkMs?: number;
  /** How long without a delivery, while the bucket is ahead, counts as stalled, in ms; default 3000. */
  stallMs?: number;
}

/** A running watch; `stop()` ends it. */
export interface BucketWatch {
  stop(): void;
}

const RETRY_MS = 250;
/** How often a watch checks that it is not behind the bucket. */
const LIVENESS_MS = 2_000;
/** How long without a delivery, while the bucket is ahead, counts as stalled. */
const STALL_MS = 3_000;

/** A KV bucket. */
export class Bucket {
  private constructor(
    private readonly kv: KV,
    private readonly js: JetStreamClient,
    readonly name: string,
    /**
     * Does the server remove a record at the end of the `ttlMs` it was written with (and write a
     * marker a watch hears as `PURGE`)? False where it has no per-message TTL: there a record
     * stays until someone deletes it or the bucket's `max_age` drops it.
     */
    readonly expires = false,
  ) {}

  /**
   * Opens the bucket, creating it when missing; rejects with `UnavailableError` without JetStream.
   * With `expiring`, on a server with per-message TTL, a bucket made before without it is updated
   * to it (the server allows turning it on, never off).
   */
  static async open(nc: NatsConnection, name: string, options: BucketOptions = {}): Promise<Bucket> {
    try {
      const expires = options.expiring === true && (await jetStreamFeatures(nc)).messageTtl;
      const kv = await new Kvm(nc).create(name, {
        replicas: options.replicas ?? 1,
        history: options.history ?? 5,
        ttl: options.maxAgeMs ?? 0,
        ...(options.maxBytes === undefined ? {} : { max_bytes: options.maxBytes }),
        ...(expires ? { markerTTL: options.markerTtlMs ?? MARKER_TTL_MS } : {}),
      });
      await updateStream(nc, (await kv.status()).streamInfo.config, {
        maxBytes: options.maxBytes,
        expires,
        markerTtlMs: options.markerTtlMs ?? MARKER_TTL_MS,
      });
      return new Bucket(kv, jetstream(nc), name, expires);
    } catch (err) {
      throw new UnavailableError(`cannot open KV bucket ${name} (is JetStream enabled?): ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  /**
   * Binds to a bucket that exists, without creating it or checking its configuration (its
   * creator chose replicas and expiry); rejects with `UnavailableError` when it is missing.
   */
  static async bind(nc: NatsConnection, name: string): Promise<Bucket> {
    try {
      const kv = await new Kvm(nc).open(name);
      const status = await kv.status();
      const expires = status.streamInfo.config.allow_msg_ttl === true && (await jetStreamFeatures(nc)).messageTtl;
      return new Bucket(kv, jetstream(nc), name, expires);
    } catch (err) {
      throw new UnavailableError(`cannot open KV bucket ${name} (does it exist?): ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  /** The sequence of the bucket's newest change; 0 when empty. */
  async lastRevision(): Promise<number> {
    const status = await this.available(() => this.kv.status(), 'read');
    return (status.streamInfo.state.last_seq as number | undefined) ?? 0;
  }

  /**
   * Writes only if the key does not exist (or was deleted); `ConflictError` otherwise. Where the
   * bucket `expires`, the record is removed by the server `ttlMs` from now (whole seconds, at
   * least one); elsewhere `ttlMs` is ignored.
   */
  create(key: string, value: Uint8Array, ttlMs?: number): Promise<number> {
    const ttl = this.ttlOf(ttlMs);
    return this.cas(() => this.kv.create(key, value, ttl), key);
  }

  /** Writes only if the key's revision is `revision`; `ConflictError` otherwise. `ttlMs` as for `create`. */
  update(key: string, value: Uint8Array, revision: number, ttlMs?: number): Promise<number> {
    const ttl = this.ttlOf(ttlMs);
    if (ttl === undefined) return this.cas(() => this.kv.update(key, value, revision), key);
    const h = headers();
    h.set(EXPECTED_REVISION, String(revision));
    h.set(NATS_TTL, ttl);
    return this.cas(() => this.publish(key, value, h), key);
  }

  /** Writes unconditionally. `ttlMs` as for `create`. */
  put(key: string, value: Uint8Array, ttlMs?: number): Promise<number> {
    const ttl = this.ttlOf(ttlMs);
    if (ttl === undefined) return this.available(() => this.kv.put(key, value), 'write');
    const h = headers();
    h.set(NATS_TTL, ttl);
    return this.available(() => this.publish(key, value, h), 'write');
  }

  /**
   * Deletes (writes a delete marker, as the KV client does), only if the key's revision is
   * `revision` when given; returns the delete's own revision, which the KV client keeps to itself.
   * Keys are subjects as they are (no key codec), and the bucket is local (no mirror prefix).
   */
  delete(key: string, revision?: number): Promise<number> {
    const h = headers();
    h.set(KV_OPERATION, 'DEL');
    if (revision !== undefined) h.set(EXPECTED_REVISION, String(revision));
    return this.cas(() => this.publish(key, Empty, h), key);
  }

  /** Publishes to a key's subject with `h`: keys are subjects as they are, the bucket local. */
  private async publish(key: string, value: Uint8Array, h: MsgHdrs): Promise<number> {
    return (await this.js.publish(`$KV.${this.name}.${key}`, value, { headers: h })).seq;
  }

  /** The `Nats-TTL` of a write that should last `ttlMs`, or undefined where records do not expire so. */
  private ttlOf(ttlMs: number | undefined): string | undefined {
    if (!this.expires || ttlMs === undefined) return undefined;
    return `${Math.max(1, Math.ceil(ttlMs / 1000))}s`;
  }

  /** The current entry of a key, or null (deleted keys are null). */
  async get(key: string): Promise<BucketEntry | null> {
    const e = await this.available(() => this.kv.get(key), 'read');
    if (e === null || e.operation !== 'PUT') return null;
    return { key: e.key, value: e.value, revision: e.revision, operation: 'PUT' };
  }

  /**
   * The keys that match `filter` (a subject pattern of keys; default all), deleted and expired
   * ones left out. The KV client (3.4) lists a key whose last message is the server's marker of
   * an expired record, so in a bucket that `expires` each key listed is read to be sure.
   */
  async keys(filter = '>'): Promise<string[]> {
    return this.available(async () => {
      const out: string[] = [];
      for await (const key of await this.kv.keys(filter)) out.push(key);
      if (!this.expires) return out;
      const live = await Promise.all(out.map(async (key) => (await this.kv.get(key))?.operation === 'PUT'));
      return out.filter((_, i) => live[i]);
    }, 'read');
  }

  /**
   * Calls `onEntry` for the last value of every key, then for every change, in order.
   * When the watch ends or fails (server restart, lost consumer) it starts again from the
   * revision after the last one delivered, so nothing is missed or repeated.
   */
  watch(
    onEntry: (entry: BucketEntry) => void,
    onError: (err: unknown) => void = () => {},
    timing: WatchTiming = {},
  ): BucketWatch {
    const stallMs = timing.stallMs ?? STALL_MS;
    let stopped = false;
    let next = 0;
    let lastDelivery = Date.now();
    let current: { stop(): void } | undefined;
    void (async () => {
      while (!stopped) {
        try {
          const iter = await this.kv.watch(next > 0 ? { resumeFromRevision: next } : {});
          current = iter;
          if (stopped) iter.stop();
          for await (const e of iter) {
            lastDelivery = Date.now();
            if (e.revision < next) continue;
            next = e.revision + 1;
            onEntry(toEntry(e));
          }
        } catch (err) {
          if (!stopped) onError(err);
        }
        if (!stopped) await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      }
    })();
    // A watch whose consumer died with its server can stall without ending: when the bucket
    // holds a revision the watch has not delivered for a while, start it again from there.
    const liveness = setInterval(() => {
      if (stopped || Date.now() - lastDelivery < stallMs) return;
      this.lastRevision().then(
        (last) => {
          // Behind means the bucket holds a revision not delivered: none at all is not behind.
          if (!stopped && last >= Math.max(next, 1) && Date.now() - lastDelivery >= stallMs) {
            onError(new Error(`watch of ${this.name} stalled at revision ${next - 1} of ${last}; restarting it`));
            lastDelivery = Date.now();
            current?.stop();
          }
        },
        () => {}, // JetStream away: the check runs again later
      );
    }, timing.checkMs ?? LIVENESS_MS);
    liveness.unref();
    return {
      stop: () => {
        stopped = true;
        clearInterval(liveness);
        current?.stop();
      },
    };
  }

  private async cas<T>(write: () => Promise<T>, key: string): Promise<T> {
    try {
      return await write();
    } catch (err) {
      if (
        err instanceof JetStreamApiError &&
        (err.code === JetStreamApiCodes.StreamWrongLastSequence ||
          err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
      ) {
        throw new ConflictError(`${key} was changed by someone else: its revision is not the one expected`, {
          cause: err,
        });
      }
      throw unavailable(this.name, 'write', err);
    }
  }

  /**
   * Keys and sizes are checked before any write, so what is left to fail is JetStream
   * itself: no responders, a timeout, a stream electing its leader. Callers may retry.
   */
  private async available<T>(op: () => Promise<T>, what: 'read' | 'write'): Promise<T> {
    try {
      return await op();
    } catch (err) {
      throw unavailable(this.name, what, err);
    }
  }
}

/**
 * Brings the stream of a bucket made before to what it is opened with now: `max_bytes` where it
 * differs (a bucket made before the bound), per-message TTL and limit markers where asked and
 * missing (made by an older server or release; the server allows turning them on, never off).
 */
async function updateStream(
  nc: NatsConnection,
  config: StreamConfig,
  wanted: { maxBytes?: number; expires: boolean; markerTtlMs: number },
): Promise<void> {
  const bytes = wanted.maxBytes !== undefined && config.max_bytes !== wanted.maxBytes;
  const ttl =
    wanted.expires && (config.allow_msg_ttl !== true || config.subject_delete_marker_ttl !== nanos(wanted.markerTtlMs));
  if (!bytes && !ttl) return;
  const jsm = await jetstreamManager(nc);
  await jsm.streams.update(config.name, {
    ...config,
    ...(bytes ? { max_bytes: wanted.maxBytes } : {}),
    ...(ttl ? { allow_msg_ttl: true, subject_delete_marker_ttl: nanos(wanted.markerTtlMs) } : {}),
  });
}

function unavailable(bucket: string, what: 'read' | 'write', err: unknown): UnavailableError {
  return new UnavailableError(
    `KV bucket ${bucket} could not take the ${what} right now (${(err as Error).message}); try again`,
    { cause: err },
  );
}

function toEntry(e: KvWatchEntry): BucketEntry {
  return { key: e.key, value: e.value, revision: e.revision, operation: e.operation as BucketEntry['operation'] };
}
