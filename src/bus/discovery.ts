/**
 * The NATS services discovery protocol (ADR-32): every instance of a mount answers
 * `$SRV.PING|INFO|STATS`, by all, by service name and by instance id, so `nats micro ls`
 * and the `@nats-io/services` client find and measure it. One endpoint per op.
 */

import { randomBytes } from 'node:crypto';
import { createInbox, type Msg, type NatsConnection, type Subscription } from '@nats-io/nats-core';
import { guarded, isInboxSubject, mountReplyPrefix, queueGroup, serviceName } from './subjects.js';

/** Running figures of one op, in ADR-32's field names; times in nanoseconds. */
export interface EndpointStats {
  name: string;
  subject: string;
  queue_group: string;
  num_requests: number;
  num_errors: number;
  last_error: string;
  processing_time: number;
  average_processing_time: number;
}

/** What discovery needs to know of a mount. */
export interface DiscoverySource {
  mount: string;
  id: string;
  version: string;
  description: string;
  startedAt: Date;
  endpoints(): EndpointStats[];
}

const verbs = ['PING', 'INFO', 'STATS'] as const;
/** The discovery verbs. */
export type Verb = (typeof verbs)[number];

/**
 * Subscribes the `$SRV` subjects of one mount instance; returns the subscriptions. Under
 * deploy/nats.conf a mount's own user may subscribe its by-name subjects only: the server refuses
 * the whole-bus `$SRV.<verb>`, and nats.js then calls the callback once with the permission error
 * and closes that subscription (reported on the connection's status, nowhere else). The mount
 * serves on, found by name; where its user may, `nats micro ls` finds it on the whole bus too.
 */
export function serveDiscovery(nc: NatsConnection, source: DiscoverySource): Subscription[] {
  const name = serviceName(source.mount);
  const subs: Subscription[] = [];
  for (const verb of verbs) {
    for (const subject of [`$SRV.${verb}`, `$SRV.${verb}.${name}`, `$SRV.${verb}.${name}.${source.id}`]) {
      subs.push(
        nc.subscribe(subject, {
          callback: guarded((err, msg) => {
            // Only onto inboxes, as mounts answer (a reply subject is the requester's choice).
            if (err === null && msg.reply !== undefined && isInboxSubject(msg.reply)) answer(msg, verb, name, source);
          }),
        }),
      );
    }
  }
  return subs;
}

function answer(msg: Msg, verb: Verb, name: string, source: DiscoverySource): void {
  const head = { name, id: source.id, version: source.version, metadata: { mount: source.mount } };
  let body: Record<string, unknown>;
  switch (verb) {
    case 'PING':
      body = { type: 'io.nats.micro.v1.ping_response', ...head };
      break;
    case 'INFO':
      body = {
        type: 'io.nats.micro.v1.info_response',
        ...head,
        description: source.description,
        endpoints: source.endpoints().map((e) => ({
          name: e.name,
          subject: e.subject,
          queue_group: queueGroup(source.mount),
          metadata: null,
        })),
      };
      break;
    case 'STATS':
      body = {
        type: 'io.nats.micro.v1.stats_response',
        ...head,
        started: source.startedAt.toISOString(),
        endpoints: source.endpoints(),
      };
      break;
  }
  msg.respond(JSON.stringify(body));
}

/** What `$SRV.INFO` says of one service instance (ADR-32). */
export interface ServiceInfo {
  name: string;
  id: string;
  version: string;
  description?: string;
  metadata?: Record<string, string> | null;
  endpoints?: Array<{ name: string; subject: string; queue_group?: string }>;
}

/**
 * Every answer to `$SRV.<verb>.<service>` within `waitMs`, parsed (answers that are not ADR-32 JSON
 * are skipped): the instances of one service, by its ADR-32 name.
 */
export async function discoverService<T extends { name: string }>(
  nc: NatsConnection,
  verb: Verb,
  service: string,
  waitMs = 250,
): Promise<T[]> {
  return (await gather<T>(nc, [`$SRV.${verb}.${service}`], waitMs))[0] ?? [];
}

/** What one discovery heard: on the whole-bus subject, and on each service's own subject. */
export interface NamedAnswers<T> {
  /** Answers to `$SRV.<verb>`: anyone who hears it may have sent them, under any name. */
  all: T[];
  /** Per service name asked, the answers to `$SRV.<verb>.<name>` that give that name. */
  byName: Map<string, T[]>;
}

/**
 * `$SRV.<verb>.<name>` for each of `services` (and `$SRV.<verb>` too, with `wholeBus`), in one
 * wait of `waitMs`. Under deploy/nats.conf only a mount's own user hears its by-name subject, so an
 * answer there that gives that name is the mount's; an answer on the whole-bus subject could be
 * anyone's. Each subject is asked for on a reply subject of its own that nobody can guess (one
 * mount learns the reply subject of its own question only), so answers are told apart by subject.
 */
export async function discoverByName<T extends { name: string }>(
  nc: NatsConnection,
  verb: Verb,
  services: readonly string[],
  waitMs = 250,
  options: { wholeBus?: boolean } = {},
): Promise<NamedAnswers<T>> {
  const names = [...new Set(services)];
  const subjects = names.map((name) => `$SRV.${verb}.${name}`);
  if (options.wholeBus) subjects.push(`$SRV.${verb}`);
  const answers = await gather<T>(nc, subjects, waitMs);
  const byName = new Map<string, T[]>();
  for (const [i, name] of names.entries())
    byName.set(
      name,
      (answers[i] ?? []).filter((a) => a.name === name),
    );
  return { all: options.wholeBus ? (answers[names.length] ?? []) : [], byName };
}

/**
 * Most answers one discovery keeps per subject asked, and in all, and the largest it reads: answers
 * are any mount user's to write.
 */
const MAX_ANSWERS = 1024;
const MAX_ANSWERS_IN_ALL = 4 * MAX_ANSWERS;
const MAX_ANSWER_BYTES = 16 * 1024;

/**
 * Every answer within `waitMs` to each of `subjects`, asked for on one inbox of
 * `mountReplyPrefix` (mounts answer discovery), each subject with its own random last token.
 * It always waits `waitMs`: an empty "no responders" status could be any mount user's, forged to
 * end the wait before the real answers come. Answers are read from
 * their bytes only (a header block nats.js cannot decode is never decoded), at most `MAX_ANSWERS`
 * per subject and `MAX_ANSWERS_IN_ALL` of at most `MAX_ANSWER_BYTES`.
 */
async function gather<T extends { name: string }>(
  nc: NatsConnection,
  subjects: readonly string[],
  waitMs: number,
): Promise<T[][]> {
  const found: T[][] = subjects.map(() => []);
  const byToken = new Map(subjects.map((_, i) => [randomBytes(16).toString('hex'), i]));
  let kept = 0;
  let sub: Subscription | undefined;
  try {
    const inbox = createInbox(mountReplyPrefix(nc));
    sub = nc.subscribe(`${inbox}.*`, {
      callback: guarded((err, msg) => {
        if (err !== null || msg.data.length === 0 || msg.data.length > MAX_ANSWER_BYTES || kept >= MAX_ANSWERS_IN_ALL)
          return;
        const answers = found[byToken.get(msg.subject.slice(inbox.length + 1)) ?? -1];
        if (answers === undefined || answers.length >= MAX_ANSWERS) return;
        try {
          const body = JSON.parse(new TextDecoder().decode(msg.data)) as T;
          if (typeof body?.name === 'string' && body.name.length <= 256) {
            answers.push(body);
            kept++;
          }
        } catch {
          // Not an ADR-32 reply: nothing to learn from it.
        }
      }),
    });
    for (const [token, i] of byToken)
      nc.publish(subjects[i] as string, new Uint8Array(), { reply: `${inbox}.${token}` });
    await new Promise((resolve) => setTimeout(resolve, waitMs));
  } catch {
    // A closed connection: nobody can answer.
  } finally {
    sub?.unsubscribe();
  }
  return found;
}

/**
 * An `$SRV.INFO` answer as far as it is well formed, or undefined: any mount user can write one,
 * so every field is checked and bounded before anything reads it (one whose `endpoints` is not a
 * list would otherwise make every `matrix_introspect` fail).
 */
export function serviceInfoOf(value: unknown): ServiceInfo | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const v = value as Record<string, unknown>;
  const text = (x: unknown, max: number) => (typeof x === 'string' ? x.slice(0, max) : undefined);
  const name = text(v.name, 256);
  if (name === undefined) return undefined;
  const info: ServiceInfo = { name, id: text(v.id, 256) ?? '', version: text(v.version, 64) ?? '' };
  const description = text(v.description, 512);
  if (description !== undefined) info.description = description;
  const mount = text((v.metadata as Record<string, unknown> | null | undefined)?.mount, 256);
  if (mount !== undefined) info.metadata = { mount };
  if (Array.isArray(v.endpoints)) {
    info.endpoints = v.endpoints
      .slice(0, MAX_ENDPOINTS)
      .map((e) => ({
        name: text((e as Record<string, unknown> | null)?.name, 128),
        subject: text((e as Record<string, unknown> | null)?.subject, 256),
      }))
      .filter((e): e is { name: string; subject: string } => e.name !== undefined && e.subject !== undefined);
  } else {
    // The older micro shape (nats.go's first `micro`, as Debian ships it): no `endpoints`, the
    // subjects served as `subject` (one endpoint) or `subjects`. Each is an endpoint named by its last token.
    const subjects = Array.isArray(v.subjects) ? v.subjects.slice(0, MAX_ENDPOINTS) : [v.subject];
    const served = subjects.map((x) => text(x, 256)).filter((x): x is string => x !== undefined && x !== '');
    if (served.length > 0) info.endpoints = served.map((subject) => ({ name: lastToken(subject), subject }));
  }
  return info;
}

/** Most endpoints read from one `$SRV.INFO` answer. */
const MAX_ENDPOINTS = 64;

function lastToken(subject: string): string {
  return subject.slice(subject.lastIndexOf('.') + 1).slice(0, 128);
}

/**
 * The mount a service instance is: its `metadata.mount` when it says; else, as for a micro
 * service in another language, the subject prefix every endpoint shares (`demo.go` for
 * endpoints `demo.go.echo` and `demo.go.fail`); else its service name.
 */
export function mountOf(info: ServiceInfo): string {
  const said = info.metadata?.mount;
  if (said) return said;
  const prefixes = new Set(
    (info.endpoints ?? []).map((e) => e.subject.slice(0, Math.max(0, e.subject.lastIndexOf('.')))),
  );
  const [prefix] = prefixes;
  return prefixes.size === 1 && prefix && !/[*>]/.test(prefix) ? prefix : info.name;
}

/**
 * Of `mounts`, those with a live instance: that answered `$SRV.PING.<service name>` within `waitMs`
 * under their service name, on that subject (not the whole-bus `$SRV.PING`, which anyone who
 * hears it may answer under any name), and, when the answer names its mount, naming that one.
 */
export async function pingServices(nc: NatsConnection, mounts: readonly string[], waitMs = 250): Promise<Set<string>> {
  const { byName } = await discoverByName<{ name: string; metadata?: { mount?: unknown } | null }>(
    nc,
    'PING',
    mounts.map(serviceName),
    waitMs,
  );
  return new Set(
    mounts.filter((mount) =>
      byName.get(serviceName(mount))?.some((p) => {
        const said = p.metadata?.mount;
        return said === undefined || said === mount;
      }),
    ),
  );
}
