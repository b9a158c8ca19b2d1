/** `system.dispatcher`: the dispatcher as a mount, answering `$call` (and `$introspect`). */
import type { NatsConnection } from '@nats-io/nats-core';
import { MAX_DEPTH, nestedDeeperThan } from '../bus/codec.js';
import type { Logger } from '../bus/log.js';
import { Mount, type OpContext } from '../bus/mount.js';
import { Mounts } from '../bus/subjects.js';
import { SchemaId } from '../contracts/schemas.js';
import { refusalAudit } from '../identity/audit.js';
import { IdentityGate } from '../identity/gate.js';
import { Dispatcher } from './dispatcher.js';
import type { CallRequest, ToolResult } from './types.js';

/** Version of the dispatcher implementation. */
export const DISPATCHER_VERSION = '0.1.0';

/** How to mount the dispatcher. */
export interface DispatcherMountOptions {
  /** The dispatcher to serve with; default a new one on the same connection. */
  dispatcher?: Dispatcher;
  maxRequestBytes?: number;
  logger?: Logger;
  /** Who may call as whom: grants from trusted issuers; default trusting callers (development). */
  identity?: IdentityGate;
}

/** Builds the `system.dispatcher` mount (call `start()` on it). */
export function dispatcherMount(nc: NatsConnection, options: DispatcherMountOptions = {}): Mount {
  const dispatcher = options.dispatcher ?? new Dispatcher(nc);
  const identity = options.identity ?? IdentityGate.trustingCallers();
  const audit = refusalAudit(nc);
  return new Mount(nc, {
    name: Mounts.Dispatcher,
    version: DISPATCHER_VERSION,
    description: 'The tool dispatcher: runs LLM tool calls against the mounts their context allows.',
    maxRequestBytes: options.maxRequestBytes,
    logger: options.logger,
    ops: {
      $call: {
        description: 'Runs one LLM tool call for a session and returns the result the model reads.',
        request: SchemaId.CallRequest,
        response: SchemaId.ToolResult,
        handle: (request: CallRequest, ctx: OpContext) => {
          // The grant decides the session's authority, principal and session before anything runs.
          const admitted = identity.admit(request.session, ctx, (err) => audit(request.call, ctx, err));
          const { traceparent, deadline, session, principal, grant, readSessions } = admitted.ctx;
          return dispatcher.call(admitted.request, request.call, { traceparent, deadline, session, principal, grant, readSessions }).then(travelling);
        },
      },
    },
  });
}

/**
 * A result as it can travel: a `structured` reply nested deeper than a body may be (it could
 * not be encoded, or read back) is left out; `content` still holds its text.
 */
function travelling(result: ToolResult): ToolResult {
  const structured = result.structured;
  if (structured === null || typeof structured !== 'object' || !nestedDeeperThan(structured, MAX_DEPTH - 1)) return result;
  const { structured: _dropped, ...rest } = result;
  return rest;
}
