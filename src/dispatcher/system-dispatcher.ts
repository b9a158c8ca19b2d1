/**
 * `system.dispatcher`: the dispatcher as a mount, answering `$call` (and `$introspect`): the
 * grant, then the pipeline; a caller that takes progress or may cancel gets its hooks relayed.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { decodeMap, decodeUnlabelled } from '../bus/codec.js';
import type { CallContext, Progress } from '../bus/context.js';
import { SchemaId } from '../bus/contracts.js';
import type { Logger } from '../bus/log.js';
import { Mount, type OpContext } from '../bus/mount.js';
import { Mounts } from '../bus/subjects.js';
import { GrantError } from '../identity/errors.js';
import { IdentityGate } from '../identity/gate.js';
import { GrantFailure } from '../identity/types.js';
import type { ResolveRequest } from '../registry/types.js';
import type { TaskRunner } from '../tasks/runner.js';
import type { Task, TaskRequest } from '../tasks/types.js';
import type { CallHooks } from './call-hooks.js';
import { Dispatcher, type RefusedCall } from './dispatcher.js';
import { errorResult, failure } from './results.js';
import type { CallRequest, ToolCall, ToolResult } from './types.js';

/** Version of the dispatcher implementation. */
export const DISPATCHER_VERSION = '0.1.0';

/** How to mount the dispatcher. */
export interface DispatcherMountOptions {
  /**
   * The dispatcher to serve with (the caller closes it); default a new one on the same connection,
   * closed by `stop()`.
   */
  dispatcher?: Dispatcher;
  maxRequestBytes?: number;
  logger?: Logger;
  /** Who may call as whom: grants from trusted issuers; default trusting callers (development). */
  identity?: IdentityGate;
  /** Runs `$call`s that ask for `task` (PROTOCOL 9); without it, such a call is refused as a result. */
  tasks?: TaskRunner;
}

/**
 * Builds the `system.dispatcher` mount (call `start()` on it). A dispatcher it creates itself is
 * closed when the mount stops (its registry watch ends, its unsent audit events go out); one
 * passed in belongs to the caller.
 */
export function dispatcherMount(nc: NatsConnection, options: DispatcherMountOptions = {}): Mount {
  const identity = options.identity ?? IdentityGate.trustingCallers();
  const dispatcher = options.dispatcher ?? new Dispatcher(nc, { identity });
  return new Mount(nc, {
    name: Mounts.Dispatcher,
    version: DISPATCHER_VERSION,
    description: 'The tool dispatcher: runs LLM tool calls against the mounts their context allows.',
    maxRequestBytes: options.maxRequestBytes,
    logger: options.logger,
    describe: () => ({ natsServer: identity.natsServer(nc.info?.version) }),
    onStop: options.dispatcher === undefined ? () => dispatcher.close() : undefined,
    // A $call refused before it ran (bad body, bad header, deadline past) is audited as well,
    // under the principal of its grant when that grant is valid.
    onRefused: ({ op, data, traceparent, grant, error }) => {
      if (op !== '$call') return;
      if (error instanceof GrantError) dispatcher.refused(callIn(data), traceparent, refusedCallOf(error));
      else dispatcher.refused(callIn(data), traceparent, { code: error.code, ...identity.holder(grant) });
    },
    ops: {
      $call: {
        description: 'Runs one LLM tool call for a session and returns the result the model reads.',
        request: SchemaId.CallRequest,
        response: SchemaId.CallReply,
        // No valid grant, no body read: the refusal costs a header read.
        beforeBody: identity.beforeBody,
        handle: (request: CallRequest, ctx: OpContext) => {
          // The grant decides the session's authority, principal and session before anything runs.
          const admitted = identity.admit(request.session, ctx, (err) =>
            dispatcher.refused(request.call, ctx.traceparent, refusedCallOf(err)),
          );
          const { traceparent, deadline, session, principal, grant, readSessions } = admitted.ctx;
          if (request.task !== undefined)
            return startTask(dispatcher, options.tasks, admitted.request, request.call, admitted.ctx, request.task);
          const hooks = relayHooks(ctx);
          const done = dispatcher.call(
            admitted.request,
            request.call,
            { traceparent, deadline, session, principal, grant, readSessions },
            hooks,
          );
          // A report held back by the relay's thinning goes out before the reply.
          const relay = hooks?.onProgress;
          if (relay === undefined) return done;
          return done.then((result) => {
            relay.flush();
            return result;
          });
        },
      },
    },
  });
}

/**
 * A `$call` with `task`: membership and arguments checked at once (a refusal is the result, as
 * for any call), then `{task}` before any approval or target; the runner goes on with it. A task
 * refused here (no runner, or the principal's live tasks at their cap) is told to the audit
 * trail as every refused call is, within the principal's refusal budget.
 */
async function startTask(
  dispatcher: Dispatcher,
  runner: TaskRunner | undefined,
  session: ResolveRequest,
  call: ToolCall,
  ctx: CallContext,
  task: TaskRequest,
): Promise<ToolResult | { task: Task }> {
  const checked = await dispatcher.check(session, call, ctx);
  if ('isError' in checked) return checked;
  const refused = (result: ToolResult) => {
    const code = result.error?.code ?? 'internal';
    dispatcher.refused(call, ctx.traceparent, { code, principal: ctx.principal, session: ctx.session });
    return result;
  };
  if (runner === undefined) return refused(errorResult(call.id, call.name, failure.tasksOff(call.name)));
  const made = await runner.create(session, call, ctx, checked, task);
  return 'isError' in made ? refused(made) : { task: made };
}

/**
 * A refused grant as the audit tells it: the failure, and whom a trusted issuer's signature
 * names: the principal and session of a valid grant (the body asked for other authority),
 * else only the signed `sub` (an expired grant proves nothing of who sends it now).
 */
function refusedCallOf(err: GrantError): RefusedCall {
  const refusal: RefusedCall = { code: err.code, grantFailure: err.failure };
  if (err.failure === GrantFailure.Authority && err.subject !== undefined && err.session !== undefined) {
    refusal.principal = err.subject;
    refusal.session = err.session;
  } else if (err.subject !== undefined) refusal.grantSubject = err.subject;
  return refusal;
}

/** Longest refused body whose call id and tool name are read for its audit event. */
const REFUSED_BODY_READ_BYTES = 4 * 1024;

/** What can be read of a refused request's call: its id and tool name when they are short strings. */
function callIn(data: Uint8Array): ToolCall {
  let call: unknown;
  // Only a short body is read, within the request bounds: a refusal costs no more than the bytes it read.
  if (data.length <= REFUSED_BODY_READ_BYTES) {
    try {
      call = decodeUnlabelled(data, decodeMap).call;
    } catch {
      call = undefined;
    }
  }
  const field = (name: 'id' | 'name') => {
    const value = call !== null && typeof call === 'object' ? (call as Record<string, unknown>)[name] : undefined;
    return typeof value === 'string' && value.length <= 256 ? value : '(unreadable)';
  };
  return { id: field('id'), name: field('name'), arguments: {} };
}

/** Shortest time between two progress reports passed on to one caller, in ms: a target's flood is thinned to this. */
export const PROGRESS_RELAY_MS = 100;

/** A progress relay that thins a flood: `report` at most once per interval, and `flush` for the latest held back. */
export interface ThrottledProgress {
  (progress: Progress): void;
  /** Sends the latest report held back, if any: call it before the reply, so the last one is never lost. */
  flush(): void;
}

/**
 * `report`, called at most once per `everyMs`: a report within the interval is held back, and
 * replaced by any later one, until the next report past the interval or `flush()`.
 */
export function throttled(report: (progress: Progress) => void, everyMs = PROGRESS_RELAY_MS): ThrottledProgress {
  let last = 0;
  let held: Progress | undefined;
  const relay = ((progress: Progress) => {
    const now = Date.now();
    if (now - last < everyMs) {
      held = progress;
      return;
    }
    last = now;
    held = undefined;
    report(progress);
  }) as ThrottledProgress;
  relay.flush = () => {
    if (held === undefined) return;
    const progress = held;
    held = undefined;
    report(progress);
  };
  return relay;
}

/**
 * The hooks of a `$call` whose caller takes progress (`Matrix-Progress: 1`) or may cancel it (it
 * sent a `Matrix-Call-Id`: `system.dispatcher.$cancel {callId}` fires its signal); undefined for a
 * plain call, which then builds nothing.
 */
export function relayHooks(ctx: OpContext): (CallHooks & { onProgress?: ThrottledProgress }) | undefined {
  if (!ctx.wantsProgress && ctx.callId === undefined) return undefined;
  const hooks: CallHooks & { onProgress?: ThrottledProgress } = {};
  if (ctx.wantsProgress) {
    hooks.onProgress = throttled((p) => ctx.progress(p.progress, p.total, p.message));
    // Reports within the relay's interval are not decoded at all.
    hooks.progressEveryMs = PROGRESS_RELAY_MS;
  }
  if (ctx.callId !== undefined) hooks.signal = ctx.signal;
  return hooks;
}
