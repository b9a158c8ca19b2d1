/**
 * A world with one approval-gated tool for approvals tests: a target that counts its calls,
 * a dispatcher that resolves a context holding `deploy` (gated), and `system.approvals` on a
 * bucket of the test's own.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { type ApprovalsMountOptions, approvalsMount } from '../../src/approvals/system-approvals.js';
import type { AnswerReply, PendingApproval, PendingReply } from '../../src/approvals/types.js';
import { BusClient } from '../../src/bus/client.js';
import type { CallContext } from '../../src/bus/context.js';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher, type DispatcherOptions } from '../../src/dispatcher/dispatcher.js';
import { localToolSource } from '../../src/dispatcher/session-cache.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { builtinContexts } from '../../src/registry/builtins.js';
import { Registry } from '../../src/registry/registry.js';
import { StaticStore, storedBuiltin } from '../../src/registry/store.js';
import type { ResolveRequest, ToolContextSpec } from '../../src/registry/types.js';
import { testConnection } from './bus.js';
import { eventually } from './eventually.js';
import { startTarget, type Target } from './targets.js';

let n = 0;

/**
 * A `matrix_invoke` of `target`'s `op` through `system.dispatcher.$call`, in a session of
 * `profile`, sent with `options` (a grant, a principal); its result once a person answers.
 */
export function invokeThroughDispatcher(
  client: BusClient,
  call: { id: string; profile: string; target: string | undefined; op: string; args: Record<string, unknown> },
  options: Parameters<BusClient['request']>[3],
): Promise<ToolResult> {
  return client.request<ToolResult>(
    'system.dispatcher',
    '$call',
    {
      session: { profile: call.profile },
      call: { id: call.id, name: 'matrix_invoke', arguments: { target: call.target, op: call.op, args: call.args } },
    },
    options,
  );
}

/** A bucket of pending approvals no other test uses. */
export function uniqueApprovalsBucket(): string {
  return `test-approvals-${process.pid}-${Date.now().toString(36)}-${n++}`;
}

/** The context with the gated tool `deploy` (→ `<target>.$deploy`) and the open tool `peek`. */
export function gatedContext(target: string): ToolContextSpec {
  return {
    key: 'approvals-test',
    title: 'Approvals test',
    description: 'One gated tool',
    matrixTools: [
      {
        name: 'deploy',
        description: 'deploys a service',
        inputSchema: { type: 'object', properties: { service: { type: 'string' } } },
        target,
        op: '$deploy',
      },
    ],
    permissions: { approval: { tools: ['deploy'] } },
  };
}

/** The session that has `deploy`. */
export const gatedSession: ResolveRequest = { profile: 'default', toolContextRefs: ['approvals-test'] };

/** A dispatcher whose sessions resolve in process (the built-ins and `approvals-test`). */
export function gatedDispatcher(nc: NatsConnection, target: string, options: DispatcherOptions = {}): Dispatcher {
  const store = new StaticStore(
    [...builtinContexts.map(storedBuiltin), { spec: gatedContext(target), source: 'registered' as const, revision: 1 }],
    1,
  );
  return new Dispatcher(nc, { source: localToolSource(new Registry(store)), audit: false, ...options });
}

/** A target whose `$deploy` answers `{deployed: <service>}` and counts its calls. */
export function deployTarget(nc: NatsConnection, name: string): Promise<Target> {
  return startTarget(nc, name, { $deploy: (args) => ({ deployed: (args as { service?: string }).service }) });
}

/** Starts `system.approvals` on `bucket`, sweeping every 200 ms. */
export async function startApprovals(
  nc: NatsConnection,
  bucket: string,
  options: ApprovalsMountOptions = {},
): Promise<Mount> {
  return (await approvalsMount(nc, { bucket, sweepMs: 200, ...options })).start();
}

/** The ops of `system.approvals`, as a person's client calls them. */
export class ApprovalsClient {
  readonly client: BusClient;
  constructor(nc: NatsConnection) {
    this.client = new BusClient(nc, { timeoutMs: 5_000 });
  }

  pending(
    ctx: CallContext = {},
    body: { cursor?: string; limit?: number; approvalId?: string } = {},
  ): Promise<PendingReply> {
    return this.client.request<PendingReply>('system.approvals', '$pending', body, ctx);
  }

  answer(body: Record<string, unknown>, ctx: CallContext = {}): Promise<AnswerReply> {
    return this.client.request<AnswerReply>('system.approvals', '$answer', body, ctx);
  }

  /** The pending approval of a call, once it is listed. */
  awaitPending(callId: string, ctx: CallContext = {}): Promise<PendingApproval> {
    return eventually(async () => {
      const found = (await this.pending(ctx)).approvals.find((a) => a.callId === callId);
      if (found === undefined) throw new Error(`call ${callId} is not pending yet`);
      return found;
    });
  }

  close(): void {
    this.client.close();
  }
}

/** An approvals test's world: the deploy target, `system.approvals` on the test's bucket, a gated dispatcher asking it, and a person's client. */
export interface ApprovalsWorld {
  nc: NatsConnection;
  target: Target;
  /** The approvals mount; a test that restarts it puts the new one here, and `stop()` stops that one. */
  approvals: Mount;
  dispatcher: Dispatcher;
  person: ApprovalsClient;
  /** Closes the dispatcher and the client, stops the target and the approvals mount (the bucket stays). */
  stop(): Promise<void>;
}

/** Starts an {@link ApprovalsWorld}: the target `app`, approvals on `bucket` (with `approvals` options), a dispatcher (with `dispatcher` options) waiting on `bucket`. */
export async function startApprovalsWorld(
  app: string,
  bucket: string,
  options: { approvals?: ApprovalsMountOptions; dispatcher?: DispatcherOptions } = {},
): Promise<ApprovalsWorld> {
  const nc = await testConnection();
  const target = await deployTarget(nc, app);
  const approvals = await startApprovals(nc, bucket, options.approvals);
  const dispatcher = gatedDispatcher(nc, app, { ...options.dispatcher, approvalsBucket: bucket });
  const person = new ApprovalsClient(nc);
  const world: ApprovalsWorld = {
    nc,
    target,
    approvals,
    dispatcher,
    person,
    stop: async () => {
      dispatcher.close();
      person.close();
      target.stop();
      await world.approvals.stop();
    },
  };
  return world;
}
