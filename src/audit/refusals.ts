/**
 * A bound on the audit events of refusals no valid grant stands behind (PROTOCOL 8). Any user
 * that may publish to `system.dispatcher.$call` can have calls refused as fast as the server
 * takes them, and the trail is bounded by bytes, oldest dropped first: one stored event per
 * refusal would let anyone push everyone else's events out of it. A token bucket lets
 * `perMinute` of them (`burst` at once) be stored as they are; past it each is counted, and one
 * summary per `summaryMs` says how many, why and for which tools, so none goes untold. A
 * principal's refusals that cost it nothing to send (a session that does not resolve, a tool
 * not in its session, refused arguments) have a budget of its own, so no agent can push the
 * others' events out of the trail. `RefusalAudit` is the one door through which every refusal
 * reaches the trail.
 */
import { randomUUID } from 'node:crypto';
import { type CallEvent, newCallEvent, type RefusalSummary } from './events.js';
import { type AuditLog, isoNow } from './log.js';
import { PerPrincipal, TokenBucket } from './token-buckets.js';

/** How many refusals without a valid grant are stored one by one; every field has a default. */
export interface RefusalBudgetOptions {
  /** Refusals stored one by one per minute, on average; default 30. 0 stores none past the burst. */
  perMinute?: number;
  /** Most stored in a row after a quiet spell; default 200. */
  burst?: number;
  /** Longest a counted refusal waits for its summary, in ms; default 10000. */
  summaryMs?: number;
  /** The clock, in ms; default `performance.now`. */
  now?: () => number;
  /** The wall clock, ISO 8601, for `since`; default `new Date().toISOString()`. */
  iso?: () => string;
}

/**
 * Default refusals stored per minute. A flood that never stops, against the default trail
 * (1 GiB, 7 days), then writes ~280 bytes (~450 with the longest id and name kept) every 2 s
 * and a summary of at most ~680 bytes every 10 s (both as stored, with the stream's own
 * overhead): 125–175 MB a week, 12–17% of the trail, per dispatcher instance
 * (docs/operations.md, "The audit trail").
 */
export const DEFAULT_REFUSALS_PER_MINUTE = 30;
/** Default burst of stored refusals: a misconfigured agent's first refusals are all stored. */
export const DEFAULT_REFUSAL_BURST = 200;
/** Default longest wait of a counted refusal for its summary, in ms. */
export const DEFAULT_SUMMARY_MS = 10_000;
/** Tool names a summary lists. */
const MAX_TOOLS = 8;
/** Characters of a tool name a summary keeps. */
const MAX_TOOL_NAME = 32;

/** The token bucket of stored refusals, and the count of those past it until their summary. */
export class RefusalBudget {
  private readonly bucket: TokenBucket;
  private readonly summaryMs: number;
  private readonly now: () => number;
  private readonly iso: () => string;
  private pending: RefusalSummary | undefined;
  private timer: NodeJS.Timeout | undefined;

  /** `publish` gets each summary (it must not throw). */
  constructor(
    options: RefusalBudgetOptions,
    private readonly publish: (summary: RefusalSummary) => void,
  ) {
    this.bucket = new TokenBucket(
      options.burst ?? DEFAULT_REFUSAL_BURST,
      (options.perMinute ?? DEFAULT_REFUSALS_PER_MINUTE) / 60_000,
    );
    this.summaryMs = options.summaryMs ?? DEFAULT_SUMMARY_MS;
    this.now = options.now ?? (() => performance.now());
    this.iso = options.iso ?? (() => new Date().toISOString());
  }

  /**
   * May this refusal's event be stored? If not, it is counted (by `reason`, and its `tool`) into
   * the summary published within `summaryMs`.
   */
  admit(reason: string, tool: string): boolean {
    if (this.bucket.take(1, this.now())) return true;
    this.count(reason, tool);
    return false;
  }

  /** Publishes the summary of what was counted, if anything was; the next one starts empty. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const summary = this.pending;
    if (summary === undefined) return;
    this.pending = undefined;
    this.publish(summary);
  }

  private count(reason: string, tool: string): void {
    let summary = this.pending;
    if (summary === undefined) {
      summary = { count: 0, reasons: {}, tools: [], otherTools: 0, since: this.iso() };
      this.pending = summary;
      this.timer = setTimeout(() => this.flush(), this.summaryMs);
      this.timer.unref();
    }
    summary.count++;
    summary.reasons[reason] = (summary.reasons[reason] ?? 0) + 1;
    const name = tool.length > MAX_TOOL_NAME ? tool.slice(0, MAX_TOOL_NAME) : tool;
    if (summary.tools.includes(name)) return;
    if (summary.tools.length < MAX_TOOLS) summary.tools.push(name);
    else summary.otherTools++;
  }
}

/** The `name` of a summary event of refusals. */
export const REFUSALS = '(refusals)';

/**
 * Characters of a refused call's id and tool name its event keeps (a name no session has is the
 * caller's to choose).
 */
const REFUSED_NAME_CHARS = 64;

/**
 * Every refusal's way into the audit trail: a budget for callers without a valid grant, one per
 * principal, and the summary events of what they counted.
 */
export class RefusalAudit {
  private readonly anonymous: RefusalBudget;
  /** Each principal's budget; one forgotten (`MAX_PRINCIPALS` held) publishes its summary first. */
  private readonly principals: PerPrincipal<RefusalBudget>;

  constructor(
    private readonly log: AuditLog,
    options: RefusalBudgetOptions = {},
  ) {
    this.anonymous = new RefusalBudget(options, (summary) => this.summarise(summary));
    this.principals = new PerPrincipal(
      (principal) => new RefusalBudget(options, (summary) => this.summarise(summary, principal)),
      (budget) => budget.flush(),
    );
  }

  /**
   * A refused call's finished event: its id and name cut to `REFUSED_NAME_CHARS`, then stored
   * when the budget of its `principal` (none: the budget of callers without a valid grant)
   * admits it, else counted (by `reason`) into that budget's summary and told only to the
   * in-process observers. Returns whether it was stored.
   */
  refused(event: CallEvent, reason: string, principal: string | undefined): boolean {
    const budget = principal === undefined ? this.anonymous : this.principals.of(principal);
    const admitted = budget.admit(reason, event.name);
    shorten(event);
    if (admitted) this.log.record(event);
    else this.log.observe(event);
    return admitted;
  }

  /** Publishes every summary of what was counted and forgets the principals' budgets. */
  flush(): void {
    this.anonymous.flush();
    this.principals.clear();
  }

  /**
   * Publishes a summary of refusals counted past the rate (one principal's, when given), as an
   * event of its own (no call's).
   */
  private summarise(summary: RefusalSummary, principal?: string): void {
    const event = newCallEvent(`refusals-${randomUUID()}`, REFUSALS);
    event.principal = principal;
    event.outcome = 'error';
    event.at = isoNow();
    event.refused = summary;
    this.log.record(event, false);
  }
}

/** Cuts a refused call's id and name to `REFUSED_NAME_CHARS` (never inside a surrogate pair). */
function shorten(event: CallEvent): void {
  event.callId = cut(event.callId);
  event.name = cut(event.name);
}

function cut(text: string): string {
  if (text.length <= REFUSED_NAME_CHARS) return text;
  const end = REFUSED_NAME_CHARS - 1;
  const code = text.charCodeAt(end - 1);
  return `${text.slice(0, code >= 0xd800 && code <= 0xdbff ? end - 1 : end)}…`;
}
