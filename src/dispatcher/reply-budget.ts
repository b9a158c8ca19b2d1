/**
 * Bytes of replies a target may have in flight to this process at once. Every reply a target
 * sends is queued for this process at nats-server before it is read, on the one connection all
 * targets share (`<name>-targets`); past the server's pending limit (64 MB by default) the server
 * cuts that connection as a slow consumer, and every reply in flight on it, every target's, is
 * lost. 64 calls answered with ~1 MB each did that. So calls to a target are admitted while
 * (calls in flight + 1) × (the size its replies are taken to be) stays within a budget, and each
 * principal's within a share of it; a call past it waits, in order, until replies come back (or
 * its deadline passes: it is then refused unsent).
 *
 * The size a target's replies are taken to be starts at the server's max_payload (nothing is
 * known of a new target: its first calls may all be answered with max_payload), rises at once to
 * a larger reply (its size as framed, headers too) and halves with each smaller one (to no less
 * than it). A target answering small replies is bound after a dozen of them only by its calls in
 * flight (`TargetSlots`); one answering ~1 MiB has 16 in flight (4 per principal) under the
 * default budget of 16 MiB. A target may then answer many calls it was taken to answer small with
 * large replies at once: what its replies send past the size they were taken to be is counted
 * into its bucket of bytes (`TargetReports.countReply`), and past 16 MiB every request to it stops.
 *
 * All targets together are bounded too (48 MiB), and one principal's calls could hold all of it
 * at no cost (calls to 12 new targets that never answer, 1 MiB each). So a principal holding
 * less than a target's share (4 MiB) of replies in flight in all is admitted past the total, as a
 * target with nothing in flight is: another principal's calls to an honest target go on.
 */

/** What a call waits for: a place within its target's budget (and its principal's share). */
interface Waiter {
  principal: string | undefined;
  admitted(): void;
}

/** One target's replies in flight. */
interface TargetReplies {
  /** Bytes its replies are taken to be. */
  size: number;
  inFlight: number;
  /** Bytes its calls in flight reserved (each the size its replies were taken to be when admitted). */
  reserved: number;
  byCaller: Map<string, number>;
  waiting: Waiter[];
}

/** One principal's calls in flight, to every target. */
interface CallerReplies {
  calls: number;
  /** Bytes they reserved. */
  reserved: number;
}

/** What holds a call back: its target's budget, its principal's share of it, or the total of all targets. */
export type ReplyBound = 'target' | 'share' | 'total';

/** The default budget of replies in flight per target: 16 MiB (a quarter of nats-server's default pending limit). */
export const DEFAULT_REPLY_BUDGET = 16 * 2 ** 20;

/**
 * The default budget of replies in flight of all targets together: 48 MiB, three quarters of
 * nats-server's default pending limit (64 MB) for the one connection they share, so that several
 * targets answering large replies at once cannot fill it either. A target with nothing in
 * flight is always admitted one call (at most max_payload).
 */
export const DEFAULT_TOTAL_REPLY_BUDGET = 48 * 2 ** 20;

/** Most idle targets whose reply size is remembered. */
const MAX_TARGETS = 4096;

/** Why a call waiting for its place gave up. */
export type ReplyWaitEnd = 'deadline' | 'cancelled';

/** The replies in flight of each target, within a budget of bytes (see the module's comment). */
export class ReplyBudget {
  private readonly targets = new Map<string, TargetReplies>();
  /** Targets with calls waiting: a release of any target's place may admit them. */
  private readonly waitingTargets = new Map<string, TargetReplies>();
  /** Bytes reserved by every call in flight. */
  private total = 0;
  /** Each principal's calls in flight to every target. */
  private readonly callers = new Map<string, CallerReplies>();

  /**
   * @param budget bytes of replies in flight per target.
   * @param share bytes of them one principal may hold; default a quarter of `budget`.
   * @param firstSize what a target's replies are taken to be before any came: the server's max_payload.
   * @param totalBudget bytes of replies in flight of all targets together.
   */
  constructor(
    private readonly budget: number = DEFAULT_REPLY_BUDGET,
    private readonly share: number = budget / 4,
    private readonly firstSize: () => number = () => 2 ** 20,
    private readonly totalBudget: number = DEFAULT_TOTAL_REPLY_BUDGET,
  ) {}

  /**
   * A place for a call to `target` by `principal`: undefined when it has one now, else a promise
   * of one (resolves undefined when admitted, or why it gave up: its deadline passed, `signal`
   * fired; it then holds no place).
   */
  admit(
    target: string,
    principal: string | undefined,
    deadline: number,
    signal?: AbortSignal,
  ): Promise<ReplyWaitEnd | undefined> | undefined {
    const t = this.of(target);
    // Those waiting are over their principal's share (the target's budget has room, or a release
    // would have admitted them): another principal's call that fits goes by.
    if (this.fits(t, principal)) {
      this.hold(t, principal);
      return undefined;
    }
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const end = (why: ReplyWaitEnd | undefined) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(why);
      };
      const waiter: Waiter = { principal, admitted: () => end(undefined) };
      const giveUp = (why: ReplyWaitEnd) => {
        const at = t.waiting.indexOf(waiter);
        if (at < 0) return;
        t.waiting.splice(at, 1);
        if (t.waiting.length === 0) this.waitingTargets.delete(target);
        end(why);
        this.wake(target, t);
      };
      const onAbort = () => giveUp('cancelled');
      timer = setTimeout(() => giveUp('deadline'), Math.max(0, deadline - Date.now()));
      signal?.addEventListener('abort', onAbort, { once: true });
      t.waiting.push(waiter);
      this.waitingTargets.set(target, t);
    });
  }

  /** Gives back the place of a call to `target` by `principal`; `bytes` of its reply, when one came. */
  release(target: string, principal: string | undefined, bytes: number | undefined): void {
    const t = this.targets.get(target);
    if (t === undefined) return;
    if (bytes !== undefined) t.size = Math.max(bytes, t.size / 2);
    const freed = t.reserved / t.inFlight;
    t.reserved -= freed;
    this.total = Math.max(0, this.total - freed);
    t.inFlight--;
    if (t.inFlight === 0) t.reserved = 0;
    if (principal !== undefined) {
      const left = (t.byCaller.get(principal) ?? 1) - 1;
      if (left <= 0) t.byCaller.delete(principal);
      else t.byCaller.set(principal, left);
      const c = this.callers.get(principal);
      if (c !== undefined) {
        c.calls--;
        c.reserved = Math.max(0, c.reserved - freed);
        if (c.calls <= 0) this.callers.delete(principal);
      }
    }
    this.wake(target, t);
    // The total has room again: other targets' waiting calls may fit now.
    for (const [other, o] of this.waitingTargets) if (o !== t) this.wake(other, o);
  }

  /** Bytes `target`'s replies are taken to be now. */
  sizeOf(target: string): number {
    return this.targets.get(target)?.size ?? this.firstSize();
  }

  /** What holds a call to `target` by `principal` back now, or undefined when nothing does. */
  boundOf(target: string, principal: string | undefined): ReplyBound | undefined {
    const t = this.targets.get(target);
    if (t === undefined || t.inFlight === 0) return undefined;
    if ((t.inFlight + 1) * t.size > this.budget) return 'target';
    if (principal !== undefined) {
      const mine = t.byCaller.get(principal) ?? 0;
      if (mine > 0 && (mine + 1) * t.size > this.share) return 'share';
    }
    return this.fitsTotal(t, principal) ? undefined : 'total';
  }

  /** Calls waiting for a place with `target`. */
  waiting(target: string): number {
    return this.targets.get(target)?.waiting.length ?? 0;
  }

  /** Admits the waiting calls that fit now, in order (one over its principal's share lets the next by). */
  private wake(target: string, t: TargetReplies): void {
    for (let i = 0; i < t.waiting.length; ) {
      const w = t.waiting[i] as Waiter;
      if (!this.fits(t, w.principal)) {
        // Past the target's budget none fits; past the total or a share, another principal's may.
        if (t.inFlight > 0 && (t.inFlight + 1) * t.size > this.budget) break;
        i++;
        continue;
      }
      t.waiting.splice(i, 1);
      this.hold(t, w.principal);
      w.admitted();
    }
    if (t.waiting.length === 0) this.waitingTargets.delete(target);
    // An idle target keeps only what was learned of its size, and not even that past
    // `MAX_TARGETS` records (it then starts again from the server's max_payload).
    if (t.inFlight > 0 || t.waiting.length > 0) return;
    if (t.size >= this.firstSize() || this.targets.size > MAX_TARGETS) this.targets.delete(target);
  }

  private of(target: string): TargetReplies {
    let t = this.targets.get(target);
    if (t === undefined) {
      t = { size: this.firstSize(), inFlight: 0, reserved: 0, byCaller: new Map(), waiting: [] };
      this.targets.set(target, t);
    }
    return t;
  }

  private fitsTarget(t: TargetReplies, principal: string | undefined): boolean {
    return t.inFlight === 0 || ((t.inFlight + 1) * t.size <= this.budget && this.fitsTotal(t, principal));
  }

  /** Within the total of all targets, or within a target's share for a principal holding little in all. */
  private fitsTotal(t: TargetReplies, principal: string | undefined): boolean {
    if (this.total + t.size <= this.totalBudget) return true;
    if (principal === undefined) return false;
    return (this.callers.get(principal)?.reserved ?? 0) + t.size <= this.share;
  }

  private fits(t: TargetReplies, principal: string | undefined): boolean {
    if (!this.fitsTarget(t, principal)) return false;
    if (principal === undefined) return true;
    const mine = t.byCaller.get(principal) ?? 0;
    return mine === 0 || (mine + 1) * t.size <= this.share;
  }

  private hold(t: TargetReplies, principal: string | undefined): void {
    t.inFlight++;
    t.reserved += t.size;
    this.total += t.size;
    if (principal === undefined) return;
    t.byCaller.set(principal, (t.byCaller.get(principal) ?? 0) + 1);
    const c = this.callers.get(principal);
    if (c === undefined) this.callers.set(principal, { calls: 1, reserved: t.size });
    else {
      c.calls++;
      c.reserved += t.size;
    }
  }
}
