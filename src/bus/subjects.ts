/**
 * The subjects of the project's mounts, ops, events and audit index (and the names of the audit
 * trail's index and overflow streams) are built here, so the naming rules of PROTOCOL section 1
 * live in one place. NATS's own (`$SRV`, `$KV`, `$JS`) are built beside the code that speaks
 * them (discovery.ts, kv.ts, stream-store.ts). The callbacks that subscribe to them are wrapped
 * here too (`guarded`), so that none can throw into nats.js.
 */
import type { Msg, MsgCallback, NatsConnection } from '@nats-io/nats-core';

/** The mounts this project answers as. */
export const Mounts = {
  Tools: 'system.tools',
  Dispatcher: 'system.dispatcher',
  Approvals: 'system.approvals',
  Agents: 'system.agents',
  Sessions: 'system.sessions',
  Traces: 'system.traces',
  Packages: 'system.packages',
  Tasks: 'system.tasks',
} as const;

/** The op every `Mount` answers for the requests it works on: `<mount>.$cancel {callId}` (PROTOCOL 10). */
export const CANCEL_OP = '$cancel';

/** The subject of one op: `<mount>.<op>`. */
export function opSubject(mount: string, op: string): string {
  return `${mount}.${op}`;
}

/** What a mount subscribes to: every op, one token deep (events live deeper). */
export function mountWildcard(mount: string): string {
  return `${mount}.*`;
}

/** The queue group of a mount: NATS queue names cannot hold dots. */
export function queueGroup(mount: string): string {
  return mount.replaceAll('.', '-');
}

/** The NATS services (ADR-32) name of a mount. */
export function serviceName(mount: string): string {
  return mount.replaceAll('.', '-');
}

/** Subjects a mount publishes its events on: `<mount>.events.<name>`. */
export function eventSubject(mount: string, event: string): string {
  return `${mount}.events.${event}`;
}

/** The stream holding the trace-id index of the audit trail `stream`. */
export function indexStreamName(stream: string): string {
  return `${stream}_INDEX`;
}

/** The stream of the events of principals past their share of the audit trail `stream`. */
export function overflowStreamName(stream: string): string {
  return `${stream}_OVERFLOW`;
}

/** The subject of one level of one shard of a trail's index (level 0: what a flush writes). */
export function indexShardSubject(stream: string, shard: number, level = 0): string {
  return `${Mounts.Dispatcher}.audit.${stream}.${shard}.${level}`;
}

/**
 * The level of an index shard's subject (`indexShardSubject`): its last token, a whole number;
 * undefined for any other subject (none the indexer writes).
 */
export function indexLevelOf(subject: string): number | undefined {
  const level = Number(subject.slice(subject.lastIndexOf('.') + 1));
  return Number.isSafeInteger(level) && level >= 0 ? level : undefined;
}

/** Every level of one shard of a trail's index. */
export function indexShardFilter(stream: string, shard: number): string {
  return `${Mounts.Dispatcher}.audit.${stream}.${shard}.*`;
}

/** Every subject of a trail's index (the index stream's subjects). */
export function indexSubjects(stream: string): string {
  return `${Mounts.Dispatcher}.audit.${stream}.>`;
}

/** Subjects no registered tool may target and `matrix_invoke` may not call. */
export const reservedPatterns: readonly string[] = [
  '$SYS.>',
  '$JS.>',
  '$KV.>',
  '$SRV.>',
  '_INBOX.>',
  // Reply subjects of requests that crossed a service import: answers to another account's caller.
  '_R_.>',
  `${Mounts.Tools}`,
  `${Mounts.Tools}.>`,
  `${Mounts.Dispatcher}`,
  `${Mounts.Dispatcher}.>`,
  `${Mounts.Approvals}`,
  `${Mounts.Approvals}.>`,
  `${Mounts.Tasks}`,
  `${Mounts.Tasks}.>`,
];

/** Does the NATS subject pattern `pattern` match the concrete `subject`? */
export function subjectMatches(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    const token = p[i];
    if (token === '>') return s.length > i;
    if (i >= s.length) return false;
    if (token !== '*' && token !== s[i]) return false;
  }
  return p.length === s.length;
}

const hasWildcard = (tokens: string) => tokens.split('.').some((t) => t === '*' || t === '>');
// The reserved patterns as plain comparisons: `a.b` is one subject, `a.b.>` a prefix `a.b.`.
// Checked for every tool of every stored context at start-up (500,000 at 100,000 contexts) and
// on every call, splitting each pattern and subject into tokens cost 3 µs a subject.
const reservedExact: ReadonlySet<string> = new Set(reservedPatterns.filter((p) => !hasWildcard(p)));
const reservedPrefixes = reservedPatterns
  .filter((p) => p.endsWith('.>') && !hasWildcard(p.slice(0, -2)))
  .map((p) => p.slice(0, -1));
const reservedOthers = reservedPatterns.filter(
  (p) => !reservedExact.has(p) && !reservedPrefixes.includes(p.slice(0, -1)),
);

/**
 * Is `subject` (a concrete subject, or a mount name) reserved? Every inbox is: `_INBOX.…` and
 * `_INBOX_<user>.…` alike.
 */
export function isReservedSubject(subject: string): boolean {
  if (subject.startsWith('_INBOX') || reservedExact.has(subject)) return true;
  for (const prefix of reservedPrefixes) if (subject.startsWith(prefix)) return true;
  return reservedOthers.some((pattern) => subjectMatches(pattern, subject));
}

const INBOX = /^(?:_INBOX[^.]*|_R_)\.[^.]/;

/**
 * Is `subject` an inbox (its first token starts with `_INBOX`: the NATS default, or a per-user
 * prefix such as `_INBOX_agent`; or is `_R_`, the reply subject nats-server gives a request that
 * crossed a service import, which routes the answer back to the importing account only)? Mounts
 * answer only onto inboxes: a reply subject is the requester's choice, and answering onto any
 * other would publish with the service's rights (onto a KV key, a JetStream API subject, a
 * target) on the requester's behalf.
 */
export function isInboxSubject(subject: string): boolean {
  return INBOX.test(subject);
}

/**
 * The inbox prefix of the service's requests to mounts. A mount's NATS user may publish its
 * replies there (deploy/nats.conf), never onto `_INBOX.>`, where the service's JetStream and KV
 * replies land: what a mount learns from a request's reply subject aims at nothing else.
 */
export const TARGETS_INBOX_PREFIX = '_INBOX_targets';

/**
 * Where to ask for replies a mount sends (an op, `$SRV` discovery): the connection's own inbox
 * prefix when it has one (`_INBOX_operator`: its user may receive there only), else
 * `TARGETS_INBOX_PREFIX`, never the connection's default `_INBOX`.
 */
export function mountReplyPrefix(nc: NatsConnection): string {
  const own = (nc as { options?: { inboxPrefix?: string } }).options?.inboxPrefix;
  return own && own !== '_INBOX' ? own : TARGETS_INBOX_PREFIX;
}

/*
 * Subscription callbacks that cannot throw into nats.js. An exception thrown in a callback ends
 * the connection's reader: the socket stays open, so nothing reconnects, and the connection
 * reads nothing more until it is dropped as stale minutes later: one discovery answer with a
 * header block nats.js cannot decode would wedge the whole service.
 */

/** A subscription's callback. */
export type Callback = MsgCallback<Msg>;

/** `callback`, with whatever it throws dropped: one bad message costs itself, not the connection. */
export function guarded(callback: Callback): Callback {
  return (err, msg) => {
    try {
      callback(err, msg);
    } catch {
      // The message could not be handled; the next one can be.
    }
  };
}
