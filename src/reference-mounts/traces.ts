/**
 * `system.traces`: the audit events of the dispatcher, queried by trace id, tool, session,
 * principal, outcome and time. Answered from the durable trail (a JetStream stream, the same
 * for every instance) when JetStream is there, else from the recent events this instance
 * heard, kept in memory. Target of the built-in `trace_query`. The mount only wires its op: the
 * trail, its queries and the in-memory buffer are in `src/audit/`.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { watchCallBatches } from '../audit/log.js';
import { queryTrail, type TraceQuery, type TraceQueryReply } from '../audit/query.js';
import { AuditStream, type AuditStreamOptions } from '../audit/stream.js';
import { TraceBuffer } from '../audit/trace-buffer.js';
import { SchemaId } from '../bus/contracts.js';
import type { Logger } from '../bus/log.js';
import { Mount, type OpContext } from '../bus/mount.js';
import { Mounts } from '../bus/subjects.js';
import { sessionInScope } from './session-scope.js';

/** Builds the `system.traces` mount over this instance's memory; it starts listening at once. */
export function tracesMount(nc: NatsConnection, options: { capacity?: number } = {}): { mount: Mount; stop(): void } {
  const buffer = new TraceBuffer(options.capacity);
  const stop = watchCallBatches(nc, (data) => buffer.addEncoded(data));
  return {
    mount: tracesMountOver(
      nc,
      (q) => buffer.query(q),
      'Recent tool calls made through the dispatcher, as this instance heard them.',
    ),
    stop,
  };
}

/**
 * Builds the `system.traces` mount over the durable trail, opening (creating) it and
 * indexing it; over memory, said in one logged line, when JetStream does not answer.
 */
export async function durableTracesMount(
  nc: NatsConnection,
  options: AuditStreamOptions & { logger?: Logger; capacity?: number } = {},
): Promise<{ mount: Mount; stop(): void; audit?: AuditStream }> {
  let audit: AuditStream;
  try {
    audit = await AuditStream.open(nc, options);
  } catch (err) {
    options.logger?.error(`system.traces answers from memory only: ${(err as Error).message}`);
    return tracesMount(nc, options);
  }
  const stop = await audit.startIndexer(options.logger);
  return {
    mount: tracesMountOver(
      nc,
      // A scan of the trail reads up to its budget of batches: it reports how far, and stops when cancelled.
      (q, ctx) => queryTrail(audit, q, { signal: ctx.signal, progress: (read, budget) => ctx.progress(read, budget) }),
      'Tool calls made through the dispatcher, from the durable audit trail.',
    ),
    stop,
    audit,
  };
}

function tracesMountOver(
  nc: NatsConnection,
  query: (q: TraceQuery, ctx: OpContext) => TraceQueryReply | Promise<TraceQueryReply>,
  description: string,
): Mount {
  return new Mount(nc, {
    name: Mounts.Traces,
    version: '0.2.0',
    description,
    ops: {
      $query: {
        description:
          'Tool calls, newest first, by trace id, tool, session, principal, outcome or time; a page at a time.',
        request: SchemaId.TraceQueryRequest,
        response: SchemaId.TraceQueryReply,
        // A session sees its own calls (and those its grant lets it read); an operator, all.
        handle: (q: TraceQuery, ctx: OpContext) => {
          const session = sessionInScope(q.session, ctx, 'read');
          return query(session === undefined ? q : { ...q, session }, ctx);
        },
      },
    },
  });
}
