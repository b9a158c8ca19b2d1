/**
 * The NATS services discovery protocol (ADR-32): every instance of a mount answers
 * `$SRV.PING|INFO|STATS`, by all, by service name and by instance id, so `nats micro ls`
 * and the `@nats-io/services` client find and measure it. One endpoint per op.
 */
import type { Msg, NatsConnection, Subscription } from '@nats-io/nats-core';
import { queueGroup, serviceName } from './subjects.js';

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
type Verb = (typeof verbs)[number];

/** Subscribes the `$SRV` subjects of one mount instance; returns the subscriptions. */
export function serveDiscovery(nc: NatsConnection, source: DiscoverySource): Subscription[] {
  const name = serviceName(source.mount);
  const subs: Subscription[] = [];
  for (const verb of verbs) {
    for (const subject of [`$SRV.${verb}`, `$SRV.${verb}.${name}`, `$SRV.${verb}.${name}.${source.id}`]) {
      subs.push(
        nc.subscribe(subject, {
          callback: (err, msg) => {
            if (err === null) answer(msg, verb, name, source);
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

/** Names of the services that answer `$SRV.PING` within `waitMs` (every live mount, by ADR-32 name). */
export async function pingServices(nc: NatsConnection, waitMs = 250): Promise<Set<string>> {
  const live = new Set<string>();
  const replies = await nc.requestMany('$SRV.PING', '', { strategy: 'timer', maxWait: waitMs });
  for await (const msg of replies) {
    try {
      const name = (JSON.parse(new TextDecoder().decode(msg.data)) as { name?: unknown }).name;
      if (typeof name === 'string') live.add(name);
    } catch {
      // Not an ADR-32 reply: nothing to learn from it.
    }
  }
  return live;
}
