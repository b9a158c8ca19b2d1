/**
 * The NATS services discovery protocol (ADR-32): every instance of a mount answers
 * `$SRV.PING|INFO|STATS`, by all, by service name and by instance id, so `nats micro ls`
 * and the `@nats-io/services` client find and measure it. One endpoint per op.
 */

import { createInbox, type Msg, type NatsConnection, type Subscription } from '@nats-io/nats-core';
import { guarded } from './callbacks.js';
import { isInboxSubject, mountReplyPrefix, queueGroup, serviceName } from './subjects.js';

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

/** Subscribes the `$SRV` subjects of one mount instance; returns the subscriptions. */
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

/** Every answer to `$SRV.<verb>` within `waitMs`, parsed; answers that are not ADR-32 JSON are skipped. */
export function discover<T extends { name: string }>(nc: NatsConnection, verb: Verb, waitMs = 250): Promise<T[]> {
  return gather<T>(nc, `$SRV.${verb}`, waitMs);
}

/** Every answer to `$SRV.<verb>.<service>` within `waitMs`: the instances of one service, by its ADR-32 name. */
export function discoverService<T extends { name: string }>(nc: NatsConnection, verb: Verb, service: string, waitMs = 250): Promise<T[]> {
  return gather<T>(nc, `$SRV.${verb}.${service}`, waitMs);
}

/** Most answers one discovery keeps, and the largest it reads: answers are any mount user's to write. */
const MAX_ANSWERS = 1024;
const MAX_ANSWER_BYTES = 16 * 1024;

/**
 * Every answer within `waitMs`, asked for on an inbox of `mountReplyPrefix` (mounts answer
 * discovery). It always waits `waitMs`: an empty "no responders" status could be any mount
 * user's, forged to end the wait before the real answers come (found by an outside attack).
 * Answers are read from their bytes only (a header block nats.js cannot decode is never
 * decoded), at most `MAX_ANSWERS` of at most `MAX_ANSWER_BYTES`.
 */
async function gather<T extends { name: string }>(nc: NatsConnection, subject: string, waitMs: number): Promise<T[]> {
  const found: T[] = [];
  let sub: Subscription | undefined;
  try {
    const inbox = createInbox(mountReplyPrefix(nc));
    sub = nc.subscribe(inbox, {
      callback: guarded((err, msg) => {
        if (err !== null || msg.data.length === 0 || msg.data.length > MAX_ANSWER_BYTES || found.length >= MAX_ANSWERS) return;
        try {
          const body = JSON.parse(new TextDecoder().decode(msg.data)) as T;
          if (typeof body?.name === 'string' && body.name.length <= 256) found.push(body);
        } catch {
          // Not an ADR-32 reply: nothing to learn from it.
        }
      }),
    });
    nc.publish(subject, new Uint8Array(), { reply: inbox });
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
 * so every field is checked and bounded before anything reads it (one whose `endpoints` was no
 * list made every `matrix_introspect` fail, found by an outside attack).
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
      .slice(0, 64)
      .map((e) => ({ name: text((e as Record<string, unknown> | null)?.name, 128), subject: text((e as Record<string, unknown> | null)?.subject, 256) }))
      .filter((e): e is { name: string; subject: string } => e.name !== undefined && e.subject !== undefined);
  }
  return info;
}

/**
 * The mount a service instance is: its `metadata.mount` when it says; else, as for a micro
 * service in another language, the subject prefix every endpoint shares (`demo.go` for
 * endpoints `demo.go.echo` and `demo.go.fail`); else its service name.
 */
export function mountOf(info: ServiceInfo): string {
  const said = info.metadata?.mount;
  if (said) return said;
  const prefixes = new Set((info.endpoints ?? []).map((e) => e.subject.slice(0, Math.max(0, e.subject.lastIndexOf('.')))));
  const [prefix] = prefixes;
  return prefixes.size === 1 && prefix && !/[*>]/.test(prefix) ? prefix : info.name;
}

/** Names of the services that answer `$SRV.PING` within `waitMs` (every live mount, by ADR-32 name). */
export async function pingServices(nc: NatsConnection, waitMs = 250): Promise<Set<string>> {
  return new Set((await discover<{ name: string }>(nc, 'PING', waitMs)).map((p) => p.name));
}
