/**
 * One mount instance's view of the pending approvals: the KV bucket mirrored by a watch (so
 * `$pending` reads memory, and every instance sees the approvals any instance stored), and the
 * expiry of each record at its `expiresAt`. Where the server has per-message TTL it removes the
 * record and writes a marker every watch hears; the instance whose compare-and-set delete on
 * that marker wins tells the expiry. On older servers (no per-message TTL) a sweeper deletes
 * records past their `expiresAt` (compare-and-set too: of several instances, one deletes and
 * tells the expiry).
 */
import type { BucketWatch } from '../bus/kv.js';
import type { Logger } from '../bus/log.js';
import { type ApprovalStore, isLive, type Revisioned, withPreview } from './store.js';
import { ApprovalStatus, type StoredApproval } from './types.js';

/** How often the sweeper runs, in ms, unless configured. */
export const DEFAULT_SWEEP_MS = 5_000;
/** Longest wait at start for the watch to catch up with the bucket, in ms. */
const CATCH_UP_MS = 3_000;

/**
 * How many live approvals (pending, or approved and unused) the book holds: in all, of one
 * principal, of one session.
 */
export interface LiveCounts {
  total: number;
  principal: number;
  session: number;
}

/** The mirror and the sweeper of one bucket. */
export class ApprovalBook {
  private readonly records = new Map<string, Revisioned>();
  private sorted: StoredApproval[] | undefined;
  /** Live records (pending or approved) by principal (`''`: none claimed) and by session; see `live`. */
  private readonly byPrincipal = new Map<string, number>();
  private readonly bySession = new Map<string, number>();
  private liveTotal = 0;
  /** Approvals being written right now (counted before the watch hears them), by the same keys. */
  private readonly reserved = {
    total: 0,
    byPrincipal: new Map<string, number>(),
    bySession: new Map<string, number>(),
  };
  private readonly settledListeners = new Map<string, () => void>();
  private watch: BucketWatch | undefined;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: ApprovalStore,
    private readonly onExpired: (record: StoredApproval) => void,
    private readonly logger: Logger,
  ) {}

  /**
   * Mirrors the bucket (resolving once caught up, or after 3 s) and, where the server does not
   * expire records itself, starts sweeping every `sweepMs`.
   */
  async start(sweepMs = DEFAULT_SWEEP_MS): Promise<void> {
    const last = await this.store.lastRevision().catch(() => 0);
    let caughtUp: () => void = () => {};
    const ready = new Promise<void>((resolve) => (caughtUp = resolve));
    if (last === 0) caughtUp();
    this.watch = this.store.watch(
      (key, found, revision, expired) => {
        const before = this.records.get(key);
        // Older than what this instance wrote and remembered: the watch is catching up.
        if ((before?.revision ?? 0) < revision) this.heard(key, found);
        if (expired && before !== undefined) void this.expired(before.record, revision);
        if (revision >= last) caughtUp();
      },
      (err) => this.logger.error('watch of pending approvals failed; it restarts', { error: String(err) }),
    );
    const timer = setTimeout(caughtUp, CATCH_UP_MS);
    await ready;
    clearTimeout(timer);
    if (this.store.expires) return;
    this.sweeper = setInterval(() => void this.sweep(), sweepMs);
    this.sweeper.unref();
  }

  /** Is the sweeper running (false where the server expires records by their TTL)? */
  get sweeping(): boolean {
    return this.sweeper !== undefined;
  }

  /** Stops the watch and the sweeper. */
  stop(): void {
    this.watch?.stop();
    clearInterval(this.sweeper);
  }

  /** The pending approvals not yet expired, oldest first (by request time, then id). */
  pending(now = Date.now()): StoredApproval[] {
    this.sorted ??= [...this.records.values()]
      .map((r) => r.record)
      .filter((r) => r.status === ApprovalStatus.Pending)
      .sort((a, b) =>
        a.requestedAt === b.requestedAt ? cmp(a.approvalId, b.approvalId) : cmp(a.requestedAt, b.requestedAt),
      );
    return this.sorted.filter((r) => Date.parse(r.expiresAt) > now);
  }

  /**
   * How many approvals are live (pending, or approved and unused) in all, of `principal` and of
   * `session`: kept as counts while the watch hears changes, so a call costs three map reads,
   * not a walk of the bucket. A record past its `expiresAt` counts until the sweeper removes
   * it (within one `sweepMs`).
   */
  live(principal: string | undefined, session: string | undefined): LiveCounts {
    const p = principal ?? '';
    const r = this.reserved;
    return {
      total: this.liveTotal + r.total,
      principal: (this.byPrincipal.get(p) ?? 0) + (r.byPrincipal.get(p) ?? 0),
      session: session === undefined ? 0 : (this.bySession.get(session) ?? 0) + (r.bySession.get(session) ?? 0),
    };
  }

  /**
   * Counts one approval of `principal` and `session` as live while it is being written, so
   * calls that arrive together cannot all pass a bound before the watch hears any of them;
   * returns the release (call it once the write is `remember`ed, or failed).
   */
  reserve(principal: string | undefined, session: string | undefined): () => void {
    const r = this.reserved;
    const change = (by: 1 | -1) => {
      r.total += by;
      bump(r.byPrincipal, principal ?? '', by);
      if (session !== undefined) bump(r.bySession, session, by);
    };
    change(1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      change(-1);
    };
  }

  /** Takes in a record this instance wrote at `found.revision`, unless the watch brought a newer one. */
  remember(key: string, found: Revisioned): void {
    const known = this.records.get(key);
    if (known !== undefined && known.revision >= found.revision) return;
    this.heard(key, found);
  }

  /** Is the record under `key` live (pending, or approved and unused) at `now`? */
  isLive(key: string, now = Date.now()): boolean {
    const found = this.records.get(key);
    return found !== undefined && isLive(found.record, now);
  }

  /** Calls `listener` once when the approval is no longer pending here (answered, used, removed); returns a stop. */
  whenSettled(approvalId: string, listener: () => void): () => void {
    this.settledListeners.set(approvalId, listener);
    return () => this.settledListeners.delete(approvalId);
  }

  /** Deletes records past their `expiresAt`; tells each pending one that expired. */
  async sweep(now = Date.now()): Promise<void> {
    for (const found of [...this.records.values()]) {
      if (Date.parse(found.record.expiresAt) > now) continue;
      await this.removeExpired(found, 'could not remove an expired approval; the next sweep tries again');
    }
  }

  /**
   * The server removed `record` by its TTL and wrote its marker at `revision`: of a pending one,
   * the instance whose delete on top of that marker wins tells the expiry, once among all
   * instances (an answered one expires untold, as the sweeper leaves it).
   */
  private async expired(record: StoredApproval, revision: number): Promise<void> {
    if (record.status !== ApprovalStatus.Pending) return;
    await this.removeExpired({ record, revision }, 'could not tell an expired approval');
  }

  /** Deletes `found` still as it was read; tells it expired when it was pending and this delete won. */
  private async removeExpired(found: Revisioned, failure: string): Promise<void> {
    try {
      if ((await this.store.remove(found)) && found.record.status === ApprovalStatus.Pending)
        this.onExpired(found.record);
    } catch (err) {
      this.logger.error(failure, { approvalId: found.record.approvalId, error: String(err) });
    }
  }

  private heard(key: string, found: Revisioned | undefined): void {
    const before = this.records.get(key)?.record;
    if (before !== undefined) this.count(before, -1);
    if (found === undefined) this.records.delete(key);
    else {
      this.records.set(key, withPreview(found));
      this.count(found.record, 1);
    }
    this.sorted = undefined;
    const same = found !== undefined && found.record.approvalId === before?.approvalId;
    if (before !== undefined && !(same && found.record.status === ApprovalStatus.Pending)) {
      const listener = this.settledListeners.get(before.approvalId);
      if (listener !== undefined) {
        this.settledListeners.delete(before.approvalId);
        listener();
      }
    }
  }

  private count(record: StoredApproval, by: 1 | -1): void {
    if (record.status !== ApprovalStatus.Pending && record.status !== ApprovalStatus.Approved) return;
    this.liveTotal += by;
    bump(this.byPrincipal, record.principal ?? '', by);
    if (record.session !== undefined) bump(this.bySession, record.session, by);
  }
}

function bump(counts: Map<string, number>, key: string, by: 1 | -1): void {
  const n = (counts.get(key) ?? 0) + by;
  if (n > 0) counts.set(key, n);
  else counts.delete(key);
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
