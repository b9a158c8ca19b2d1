/**
 * `system.tools`: the registry as a mount. `$list`, `$resolve`, `$search`, `$introspect`, and — over a
 * writable store (JetStream KV) — `$register` / `$unregister`, each change announced on
 * `system.tools.events.changed`; `$revoke` writes a grant revocation every instance watches.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { encodeBody, encodedOnce } from '../bus/codec.js';
import { SchemaId } from '../bus/contracts.js';
import { UnavailableError } from '../bus/errors.js';
import type { Logger } from '../bus/log.js';
import { Mount, type MountOptions, type OpContext } from '../bus/mount.js';
import { Mounts } from '../bus/subjects.js';
import { IdentityGate } from '../identity/gate.js';
import type { RevocationStore, RevokeRequest } from '../identity/revocations.js';
import { traceResolve } from '../telemetry/calls.js';
import { CHANGED_EVENTS, watchRegistry } from './events.js';
import { Registry } from './registry.js';
import type { StoreChange } from './store.js';
import type {
  ChangedEvent,
  ListRequest,
  RegisterReply,
  RegisterRequest,
  ResolveRequest,
  SearchRequest,
  UnregisterRequest,
} from './types.js';

/** Version of the registry implementation, as `$introspect` and `$SRV.INFO` report it. */
export const REGISTRY_VERSION = '0.2.0';

/** How to mount the registry. */
export interface RegistryMountOptions {
  registry?: Registry;
  maxRequestBytes?: number;
  logger?: Logger;
  /** Who may resolve what: grants from trusted issuers; default trusting callers (development). */
  identity?: IdentityGate;
  /** Where `$revoke` writes (trusted issuers and JetStream); without it `$revoke` is `unavailable`. */
  revocations?: RevocationStore;
  /**
   * How long a change the store saw waits for its change event before this instance publishes one,
   * in ms; default 1000 (plus up to as much again, at random).
   */
  announceAfterMs?: number;
}

/** Default of `announceAfterMs`. */
const ANNOUNCE_AFTER_MS = 1_000;
/** Revisions of change events heard, remembered to tell announced changes from the others. */
const HEARD_REVISIONS = 10_000;

/**
 * Every change the store applies gets a change event, also one written straight into the
 * bucket (PROTOCOL 7: the dispatcher's sessions must not outlive what they were resolved
 * from). The instance that made a change announces it at once; for the others, each serving
 * instance waits a moment, at random, and publishes the event only if it has not heard it by
 * then, so N instances seldom send more than one.
 */
class ChangeAnnouncer {
  private readonly heard = new Set<number>();
  private readonly pending = new Set<ReturnType<typeof setTimeout>>();
  private stops: Array<() => void> = [];

  constructor(
    private readonly nc: NatsConnection,
    private readonly registry: Registry,
    private readonly afterMs: number,
  ) {}

  start(): void {
    if (this.stops.length > 0) return;
    this.stops = [
      watchRegistry(this.nc, (event) => this.hear(Number(event?.revision))),
      this.registry.onChange((change) => this.schedule(change)),
    ];
  }

  stop(): void {
    for (const stop of this.stops.splice(0)) stop();
    for (const timer of this.pending) clearTimeout(timer);
    this.pending.clear();
    this.heard.clear();
  }

  private hear(revision: number): void {
    this.heard.add(revision);
    if (this.heard.size > HEARD_REVISIONS) this.heard.delete(this.heard.values().next().value as number);
  }

  private schedule(change: StoreChange): void {
    const timer = setTimeout(
      () => {
        this.pending.delete(timer);
        if (this.heard.delete(change.revision) || this.nc.isClosed() || this.nc.isDraining()) return;
        publishChange(this.nc, change);
      },
      this.afterMs * (1 + Math.random()),
    );
    this.pending.add(timer);
  }
}

/** Publishes a change on `system.tools.events.changed`. */
function publishChange(nc: NatsConnection, change: StoreChange): void {
  const event: ChangedEvent = { key: change.key, change: change.change, revision: change.revision };
  nc.publish(CHANGED_EVENTS, encodeBody(event));
}

/** The registry's mount: announces the changes nobody announced while it serves. */
class RegistryMount extends Mount {
  constructor(
    nc: NatsConnection,
    options: MountOptions,
    private readonly announcer: ChangeAnnouncer,
  ) {
    super(nc, options);
  }

  override async start(): Promise<this> {
    this.announcer.start();
    return super.start();
  }

  override async stop(): Promise<void> {
    this.announcer.stop();
    await super.stop();
  }
}

/** Builds the `system.tools` mount (call `start()` on it). */
export function registryMount(nc: NatsConnection, options: RegistryMountOptions = {}): Mount {
  const registry = options.registry ?? new Registry();
  const identity = options.identity ?? IdentityGate.trustingCallers();
  const announce = (change: StoreChange): RegisterReply => {
    publishChange(nc, change);
    return { key: change.key, revision: change.revision };
  };
  const announcer = new ChangeAnnouncer(nc, registry, options.announceAfterMs ?? ANNOUNCE_AFTER_MS);
  return new RegistryMount(
    nc,
    {
      name: Mounts.Tools,
      version: REGISTRY_VERSION,
      description: 'The tool registry: which tools an agent profile may use.',
      maxRequestBytes: options.maxRequestBytes,
      logger: options.logger,
      describe: () => ({ ...registry.describe(), natsServer: identity.natsServer(nc.info?.version) }),
      ops: {
        $list: {
          description: 'Lists tool contexts in key order, a page at a time.',
          request: SchemaId.ListRequest,
          response: SchemaId.ListReply,
          handle: (request: ListRequest) => registry.list(request, nc.info?.max_payload),
        },
        $resolve: {
          description: 'Resolves an agent profile, its skills and required capabilities into one tool context.',
          request: SchemaId.ResolveRequest,
          response: SchemaId.ResolveReply,
          sameBytesSameRequest: true,
          // No valid grant, no body read: the refusal costs a header read.
          beforeBody: identity.beforeBody,
          // A cached resolution is the same object each time: its bytes are encoded once.
          handle: (request: ResolveRequest, ctx: OpContext) =>
            traceResolve(ctx.traceparent, request.profile, () => {
              const resolved = registry.resolve(identity.admit(request, ctx).request);
              return resolved instanceof Promise ? resolved.then(encodedOnce) : encodedOnce(resolved);
            }),
        },
        $search: {
          description:
            'Searches the tools of one session (a $resolve request, under the same grant rules) by relevance to a query.',
          request: SchemaId.SearchRequest,
          response: SchemaId.SearchReply,
          beforeBody: identity.beforeBody,
          handle: (request: SearchRequest, ctx: OpContext) =>
            registry.search({ ...request, session: identity.admit(request.session, ctx).request }),
        },
        $register: {
          description: 'Registers (or, with expectedRevision, updates) a tool context in the shared registry.',
          request: SchemaId.RegisterRequest,
          response: SchemaId.RegisterReply,
          handle: async (request: RegisterRequest) => announce(await registry.register(request, nc.info?.max_payload)),
        },
        $unregister: {
          description: 'Removes a registered tool context.',
          request: SchemaId.UnregisterRequest,
          response: SchemaId.RegisterReply,
          handle: async (request: UnregisterRequest) => announce(await registry.unregister(request)),
        },
        $revoke: {
          description:
            'Revokes a grant (jti) or every grant of a principal issued until now (sub), on every instance within a second.',
          request: SchemaId.RevokeRequest,
          response: SchemaId.RevokeReply,
          handle: (request: RevokeRequest) => {
            if (options.revocations === undefined)
              throw new UnavailableError(
                'this instance keeps no revocations: they need trusted issuers (MATRIX_TRUSTED_ISSUERS) and JetStream',
              );
            return options.revocations.revoke(request);
          },
        },
      },
    },
    announcer,
  );
}
