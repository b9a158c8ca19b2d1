/**
 * `system.agents`: what lives on the bus. `$introspect` describes this mount, as every mount's
 * does, and lists the mounts that answer NATS services discovery, with their instances and ops (a
 * mount that does not name itself in its metadata is named by the subjects its endpoints serve);
 * given `mount`, only that one, with its own `$introspect` (the request schema of each op). Target
 * of the built-in `matrix_introspect`.
 *
 * A target of a registered tool is listed from the answers on its own by-name subject
 * (`$SRV.INFO.<service name>`), which only its NATS user hears under deploy/nats.conf, never from
 * an answer on the whole-bus `$SRV.INFO` that gives its name: anyone who hears that one may answer
 * it under any name. Mounts that are no target are listed from the whole-bus answers.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient, ReplyMode } from '../bus/client.js';
import { SchemaId } from '../bus/contracts.js';
import { discoverByName, mountOf, type ServiceInfo, serviceInfoOf } from '../bus/discovery.js';
import { NoRespondersError, NotFoundError, UnavailableError } from '../bus/errors.js';
import { Mount } from '../bus/mount.js';
import { Mounts, mountReplyPrefix, serviceName } from '../bus/subjects.js';
import type { IntrospectReply } from '../registry/types.js';

/** One mount as `system.agents` describes it. */
export interface MountDescription {
  mount: string;
  version?: string;
  description?: string;
  instances: number;
  ops: Array<{ op: string; description?: string; requestSchema?: Record<string, unknown> }>;
}

const AGENTS_VERSION = '0.2.0';
const INTROSPECT_DESCRIPTION =
  'This mount and the live mounts with their instances and ops; with `mount`, that mount in full.';

/** What `system.agents` is built with. */
export interface AgentsOptions {
  /** How long discovery waits for answers, in ms; 200 unless told. */
  discoveryWaitMs?: number;
  /** The mounts to ask for by name: the targets of the registered tools (`Registry.targets`). */
  targets?: () => readonly string[];
}

/** Builds the `system.agents` mount. */
export function agentsMount(nc: NatsConnection, options: AgentsOptions = {}): Mount {
  // Any mount answers its `$introspect`: onto the inboxes a mount's NATS user may publish to.
  // A request of its own each (a mount's user may publish anything onto those inboxes).
  const client = new BusClient(nc, {
    timeoutMs: 2_000,
    inboxPrefix: mountReplyPrefix(nc),
    replies: ReplyMode.PerRequest,
  });
  const waitMs = options.discoveryWaitMs ?? 200;
  const mount: Mount = new Mount(nc, {
    name: Mounts.Agents,
    version: AGENTS_VERSION,
    description: 'Describes the live mounts on the bus and their ops.',
    ops: {
      $introspect: {
        description: INTROSPECT_DESCRIPTION,
        request: SchemaId.AgentsIntrospectRequest,
        response: SchemaId.AgentsIntrospectReply,
        handle: async (request: { mount?: string }) => ({
          ...describeSelf(mount),
          mounts: await liveMounts(nc, client, waitMs, options.targets?.() ?? [], request.mount),
        }),
      },
    },
  });
  return mount;
}

/**
 * What every mount's `$introspect` says of itself, so a client of the protocol (and `check`)
 * reads this mount as any other. Schemas by `$id`: the reply stays small for the model.
 */
function describeSelf(mount: Mount): Record<string, unknown> {
  return {
    mount: mount.name,
    version: AGENTS_VERSION,
    ops: [
      {
        op: '$introspect',
        description: INTROSPECT_DESCRIPTION,
        requestSchema: { $ref: SchemaId.AgentsIntrospectRequest },
        responseSchema: { $ref: SchemaId.AgentsIntrospectReply },
      },
    ],
    instance: { id: mount.id, startedAt: mount.startedAt.toISOString() },
  };
}

/** The live mounts; given `name`, only that one, with the request schemas its own `$introspect` gives. */
async function liveMounts(
  nc: NatsConnection,
  client: BusClient,
  waitMs: number,
  targets: readonly string[],
  name: string | undefined,
): Promise<MountDescription[]> {
  const mounts = describeMounts(await infoAnswers(nc, targets, waitMs));
  if (name === undefined) return mounts;
  const one = mounts.find((m) => m.mount === name);
  if (one === undefined) return [await askedDirectly(client, name, mounts)];
  // A mount the project did not write may answer no $introspect: its ops from discovery stand.
  const own = await client.request<IntrospectReply>(one.mount, '$introspect', {}).catch(() => undefined);
  if (own !== undefined && Array.isArray(own.ops)) one.ops = opsOf(own);
  return [one];
}

/**
 * A mount discovery did not hear within its wait, asked for its `$introspect` itself: under a
 * burst an answer can come late, and "no live mount" must mean that nothing serves it (no
 * responders), never that this mount could not ask in time (`UnavailableError`, busy).
 */
async function askedDirectly(
  client: BusClient,
  name: string,
  heard: readonly MountDescription[],
): Promise<MountDescription> {
  let own: IntrospectReply;
  try {
    own = await client.request<IntrospectReply>(name, '$introspect', {});
  } catch (err) {
    if (err instanceof NoRespondersError)
      throw new NotFoundError(`no live mount ${name}; live mounts: ${heard.map((m) => m.mount).join(', ') || 'none'}`);
    throw new UnavailableError(
      `busy: ${name} did not answer discovery or its $introspect in time (${(err as Error).message}); it may be live, ask again`,
    );
  }
  const described: MountDescription = { mount: name, instances: 1, ops: opsOf(own) };
  if (typeof own?.version === 'string') described.version = own.version.slice(0, 256);
  return described;
}

/** The ops of a mount's own `$introspect`: the mount's to write, so only well-formed ones, at most `MAX_OPS`. */
function opsOf(own: IntrospectReply | undefined): MountDescription['ops'] {
  const ops: MountDescription['ops'] = [];
  for (const o of Array.isArray(own?.ops) ? own.ops.slice(0, MAX_OPS) : []) {
    if (typeof o?.op !== 'string') continue;
    ops.push({ op: o.op, description: o.description, requestSchema: o.requestSchema });
  }
  return ops;
}

/**
 * The `$SRV.INFO` answers `system.agents` believes: for each of `targets`, those on its by-name
 * subject that are of that mount; of the whole-bus answers, those of mounts that are no target.
 */
export async function infoAnswers(
  nc: NatsConnection,
  targets: readonly string[],
  waitMs: number,
): Promise<ServiceInfo[]> {
  const { all, byName } = await discoverByName<ServiceInfo>(nc, 'INFO', targets.map(serviceName), waitMs, {
    wholeBus: true,
  });
  const believed: ServiceInfo[] = [];
  for (const target of targets) {
    for (const answer of byName.get(serviceName(target)) ?? []) {
      const info = serviceInfoOf(answer);
      if (info !== undefined && mountOf(info) === target) believed.push(info);
    }
  }
  for (const answer of all) {
    const info = serviceInfoOf(answer);
    if (info !== undefined && !byName.has(serviceName(mountOf(info))) && !byName.has(info.name)) believed.push(info);
  }
  return believed;
}

/** Most mounts a description lists: what discovery hears is any mount user's to say, and a reply has a size bound. */
const MAX_MOUNTS = 128;
/** Most ops a mount's description lists, when they come from its own `$introspect` rather than discovery. */
const MAX_OPS = 256;

/** Groups `$SRV.INFO` answers by mount, in name order; answers that are not well formed are left out. */
export function describeMounts(answers: readonly unknown[]): MountDescription[] {
  const byMount = new Map<string, MountDescription>();
  for (const answer of answers) {
    const info = serviceInfoOf(answer);
    if (info === undefined) continue;
    const mount = mountOf(info);
    let d = byMount.get(mount);
    if (d === undefined) {
      d = { mount, instances: 0, ops: [] };
      if (info.version) d.version = info.version;
      if (info.description) d.description = info.description;
      for (const e of info.endpoints ?? []) {
        d.ops.push({ op: e.subject.startsWith(`${mount}.`) ? e.subject.slice(mount.length + 1) : e.subject });
      }
      byMount.set(mount, d);
    }
    d.instances++;
  }
  return [...byMount.values()]
    .sort((a, b) => (a.mount < b.mount ? -1 : a.mount > b.mount ? 1 : 0))
    .slice(0, MAX_MOUNTS);
}
