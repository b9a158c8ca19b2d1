/**
 * Every MCP mount on the bus and what its `$introspect` says: what `matrix-tools mcp servers` and
 * the console's MCP servers page both show. A mount is found as a registered context `mcp.*` or
 * an answer to the whole-bus discovery; its instances are the answers to discovery by its own
 * name (under deploy/nats.conf a host hears only those).
 */
import type { BusClient } from '../../bus/client.js';
import { discoverByName, mountOf, type ServiceInfo } from '../../bus/discovery.js';
import type { MatrixError } from '../../bus/errors.js';
import { serviceName } from '../../bus/subjects.js';
import type { Definition } from './pinning.js';

/** One tool as a host mount's `$introspect` lists it. */
export interface IntrospectedTool {
  tool: string;
  name: string;
  op: string;
  digest: string;
  gated: boolean;
  outputSchema?: unknown;
  /** A change of it is held. */
  held?: boolean;
}

/** One held change as `$introspect` lists it. */
export interface IntrospectedChange {
  tool: string;
  change: 'added' | 'changed';
  before?: string;
  after: string;
  /** The definition the server lists now (absent past the size bound: `definitionsOmitted`). */
  definition?: Definition;
  /** The accepted definition it would replace (a `changed` tool's). */
  pinned?: Definition;
  /** The definitions were left out of this answer for their size. */
  definitionsOmitted?: boolean;
}

/** What a host mount's `$introspect` says, and how many instances answered discovery. */
export interface HostIntrospect {
  mount: string;
  state: string;
  server?: { name?: string; version?: string; title?: string };
  restarts?: number;
  lastError?: string;
  tools?: IntrospectedTool[];
  held?: IntrospectedChange[];
  leftOut?: Array<{ tool: string; reason: string }>;
  instance?: { id: string };
  /** Instances that answered discovery by the mount's name. */
  instances?: number;
  /** `$introspect` was not answered: the error's code. */
  unanswered?: string;
}

/** The MCP mounts of `registered` (context keys) and of the whole-bus discovery, each introspected. */
export async function introspectMcpMounts(
  client: BusClient,
  registered: Iterable<string>,
  waitMs: number,
): Promise<HostIntrospect[]> {
  const mounts = new Set([...registered].filter((k) => k.startsWith('mcp.')));
  const { all } = await discoverByName<ServiceInfo>(client.nc, 'INFO', [], waitMs, { wholeBus: true });
  for (const mount of all.map(mountOf)) if (mount.startsWith('mcp.')) mounts.add(mount);
  const names = [...mounts].sort();
  const { byName } = await discoverByName<ServiceInfo>(client.nc, 'INFO', names.map(serviceName), waitMs);
  return Promise.all(
    names.map(async (mount) => {
      const instances = byName.get(serviceName(mount))?.length ?? 0;
      try {
        const info = await client.request<HostIntrospect>(mount, '$introspect', {}, { timeoutMs: 5_000 });
        return { ...info, mount, instances };
      } catch (err) {
        const code = (err as MatrixError).code ?? 'error';
        return { mount, state: `no answer (${code})`, instances, unanswered: code };
      }
    }),
  );
}

/** The mount of a server named as a user names it: `fs` or `mcp.fs`. */
export function mcpMountOf(name: string): string {
  return name.startsWith('mcp.') ? name : `mcp.${name}`;
}

/**
 * `mcp.<name>.$accept`: accepts the held changes of `tools` (every held change when none are
 * named; one in `digests` only while its held definition has that digest); resolves with the
 * tools accepted. Sent as its caller's NATS user: whoever may publish `mcp.*.$accept`
 * (deploy/nats.conf: the operator) may accept, from the CLI or the console alike.
 */
export async function acceptMcpChanges(
  client: BusClient,
  name: string,
  tools: readonly string[] = [],
  digests?: Record<string, string>,
): Promise<{ mount: string; accepted: string[] }> {
  const mount = mcpMountOf(name);
  const body = { ...(tools.length > 0 && { tools: [...tools] }), ...(digests !== undefined && { digests }) };
  const reply = await client.request<{ accepted: string[] }>(mount, '$accept', body);
  return { mount, accepted: reply.accepted };
}
