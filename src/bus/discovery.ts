/**
 * The NATS services discovery protocol (ADR-32): every instance of a mount answers
 * `$SRV.PING|INFO|STATS`, by all, by service name and by instance id, so `nats micro ls`
 * and the `@nats-io/services` client find and measure it. One endpoint per op.
 */
import { createInbox, type Msg, type NatsConnection, type Subscription } from '@nats-io/nats-core';
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
          callback: (err, msg) => {
            // Only onto inboxes, as mounts answer (a reply subject is the requester's choice).
            if (err === null && msg.reply !== undefined && isInboxSubject(msg.reply)) answer(msg, verb, name, source);
          },
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

/**
 * Every answer within `waitMs`, asked for on an inbox of `mountReplyPrefix` (mounts answer
 * discovery): none sooner when the server says nothing serves the subject.
 */
async function gather<T extends { name: string }>(nc: NatsConnection, subject: string, waitMs: number): Promise<T[]> {
  const found: T[] = [];
  let done: () => void = () => {};
  const finished = new Promise<void>((resolve) => (done = resolve));
  const timer = setTimeout(() => done(), waitMs);
  let sub: Subscription | undefined;
  try {
    const inbox = createInbox(mountReplyPrefix(nc));
    sub = nc.subscribe(inbox, {
      callback: (err, msg) => {
        // No responders: no instance of that service is live, which is an answer too.
        if (err !== null || (msg.data.length === 0 && msg.headers?.code === 503)) return done();
        try {
          const body = JSON.parse(new TextDecoder().decode(msg.data)) as T;
          if (typeof body?.name === 'string') found.push(body);
        } catch {
          // Not an ADR-32 reply: nothing to learn from it.
        }
      },
    });
    nc.publish(subject, new Uint8Array(), { reply: inbox });
    await finished;
  } catch {
    // A closed connection: nobody can answer.
  } finally {
    clearTimeout(timer);
    sub?.unsubscribe();
  }
  return found;
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
