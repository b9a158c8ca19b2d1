/**
 * Audit events of `$call`s refused for their grant: every call has its event (PROTOCOL 6.1),
 * so the operator sees each attempt. What the caller claimed (its session, its principal) is
 * left out: audit events carry verified identity only.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import type { CallContext } from '../bus/context.js';
import { AuditLog, isoNow } from '../dispatcher/audit.js';
import type { ToolCall } from '../dispatcher/types.js';
import type { GrantError } from './errors.js';

/** Records the refusal of a call whose grant failed. */
export type RefusalAudit = (call: ToolCall, ctx: CallContext, err: GrantError) => void;

/** A refusal audit on its own batching log. */
export function refusalAudit(nc: NatsConnection): RefusalAudit {
  const log = new AuditLog(nc);
  return (call, ctx, err) => {
    log.record({
      callId: call.id,
      name: call.name,
      target: undefined,
      op: undefined,
      session: undefined,
      principal: undefined,
      traceparent: ctx.traceparent,
      outcome: 'error',
      code: err.code,
      durationMs: 0,
      attempts: 0,
      argumentsDigest: undefined,
      argumentsBytes: undefined,
      at: isoNow(),
    });
  };
}
