/**
 * `system.agents`: what lives on the bus. `$introspect` lists every mount that answers NATS
 * services discovery, with its instances and ops; given `mount`, it adds that mount's own
 * `$introspect` (the request schema of each op). Target of the built-in `matrix_introspect`.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient } from '../bus/client.js';
import { discover, type ServiceInfo } from '../bus/discovery.js';
import { NotFoundError } from '../bus/errors.js';
import { Mount } from '../bus/mount.js';
import { Mounts } from '../bus/subjects.js';
import { SchemaId } from '../contracts/schemas.js';
import type { IntrospectReply } from '../registry/types.js';

/** One mount as `system.agents` describes it. */
export interface MountDescription {
  mount: string;
  version?: string;
  description?: string;
  instances: number;
  ops: Array<{ op: string; description?: string; requestSchema?: Record<string, unknown> }>;
}

/** Builds the `system.agents` mount. */
export function agentsMount(nc: NatsConnection, options: { discoveryWaitMs?: number } = {}): Mount {
  const client = new BusClient(nc, { timeoutMs: 2_000 });
  const waitMs = options.discoveryWaitMs ?? 200;
  return new Mount(nc, {
    name: Mounts.Agents,
    version: '0.1.0',
    description: 'Describes the live mounts on the bus and their ops.',
    ops: {
      $introspect: {
        description: 'The live mounts with their instances and ops; with `mount`, that mount in full.',
        request: SchemaId.AgentsIntrospectRequest,
        response: SchemaId.AgentsIntrospectReply,
        handle: async (request: { mount?: string }) => {
          const mounts = describeMounts(await discover<ServiceInfo>(nc, 'INFO', waitMs));
          if (request.mount === undefined) return { mounts };
          const one = mounts.find((m) => m.mount === request.mount);
          if (one === undefined) {
            throw new NotFoundError(`no live mount ${request.mount}; live mounts: ${mounts.map((m) => m.mount).join(', ') || 'none'}`);
          }
          const own = await client.request<IntrospectReply>(one.mount, '$introspect', {}).catch(() => undefined);
          if (own !== undefined) {
            one.ops = own.ops.map((o) => ({ op: o.op, description: o.description, requestSchema: o.requestSchema }));
          }
          return { mounts: [one] };
        },
      },
    },
  });
}

/** Groups `$SRV.INFO` answers by mount, in name order. */
export function describeMounts(infos: readonly ServiceInfo[]): MountDescription[] {
  const byMount = new Map<string, MountDescription>();
  for (const info of infos) {
    const mount = info.metadata?.mount ?? info.name;
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
  return [...byMount.values()].sort((a, b) => (a.mount < b.mount ? -1 : a.mount > b.mount ? 1 : 0));
}
