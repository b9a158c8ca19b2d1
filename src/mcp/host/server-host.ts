/**
 * One server on the bus: its supervisor, its pinned definitions, its mount `mcp.<name>` (one op
 * per accepted tool, `$accept`, `$introspect` with state and tools) and its context in the
 * registry, registered again whenever what it holds changes.
 */

import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { NatsConnection } from '@nats-io/nats-core';
import { encodeBody } from '../../bus/codec.js';
import type { OpContext } from '../../bus/context.js';
import { ConflictError, NotFoundError, UnavailableError } from '../../bus/errors.js';
import type { Logger } from '../../bus/log.js';
import { Mount } from '../../bus/mount.js';
import { digestOf } from '../../registry/canonical.js';
import { callUpstream, type HostReply } from './calls.js';
import type { ServerConfig } from './config.js';
import { hostOps } from './host-ops.js';
import { llmNameOf } from './names.js';
import { acceptHeld, type DefinitionEvent, type PinState, type PinStore, reconcile } from './pinning.js';
import { type HostedTool, mountOfServer, type Projection, projectServer } from './projection.js';
import type { Registrar } from './registrar.js';
import { type ServerState, Supervisor, type SupervisorTiming } from './supervisor.js';
import type { ServerIdentity, Upstream } from './upstream.js';

/** Version of the host mounts. */
export const HOST_VERSION = '1.3.0';

/** What a server host is given. */
export interface ServerHostOptions {
  pins: PinStore;
  registrar: Registrar | undefined;
  timing: SupervisorTiming;
  logger: Logger;
}

/** The subject of a server's definition events (an audit trail of pins). */
export function definitionEventSubject(server: string): string {
  return `${mountOfServer(server)}.events.definition`;
}

/**
 * Most characters of JSON of the definitions one `$introspect` shows with the held changes: a
 * server's tool definitions are its to write, and the answer must stay within a message.
 */
export const MAX_SHOWN_DEFINITIONS = 256 * 1024;

/**
 * The held changes as `$introspect` shows them: digests, and the definitions listed and accepted
 * while their JSON fits `MAX_SHOWN_DEFINITIONS` in all; past it, `definitionsOmitted`.
 */
export function heldShown(pins: PinState, budget = MAX_SHOWN_DEFINITIONS): Array<Record<string, unknown>> {
  let left = budget;
  return [...pins.held.values()].map(({ definition, ...change }) => {
    const pinned = change.change === 'changed' ? pins.accepted.get(change.tool)?.definition : undefined;
    const size = JSON.stringify(definition).length + (pinned === undefined ? 0 : JSON.stringify(pinned).length);
    if (size > left) return { ...change, definitionsOmitted: true };
    left -= size;
    return { ...change, definition, ...(pinned !== undefined && { pinned }) };
  });
}

/** One server put on the bus. */
export class ServerHost {
  readonly mountName: string;
  private readonly supervisor: Supervisor;
  private identity: ServerIdentity;
  private pins: PinState = { accepted: new Map(), held: new Map() };
  private projection: Projection | undefined;
  private byOp = new Map<string, HostedTool>();
  private mount: Mount | undefined;
  private opsDigest = '';
  private refreshing: Promise<void> = Promise.resolve();
  /** Mounts replaced by a newer one, draining. */
  private readonly retiring = new Set<Promise<void>>();

  constructor(
    private readonly nc: NatsConnection,
    readonly server: ServerConfig,
    private readonly options: ServerHostOptions,
  ) {
    this.mountName = mountOfServer(server.name);
    this.identity = { name: server.name, version: '' };
    this.supervisor = new Supervisor(
      server,
      options.timing,
      {
        onConnected: (upstream) => this.connected(upstream),
        onToolsChanged: (upstream) => {
          this.refreshing = this.refreshing.then(() =>
            this.refresh(upstream).catch((err: Error) =>
              options.logger.error(`${this.mountName}: tools not read again: ${err.message}`),
            ),
          );
        },
        onState: () => undefined,
      },
      options.logger,
    );
  }

  /** The server's state. */
  get state(): ServerState {
    return this.supervisor.state;
  }

  /** Mounts (with no tool yet), then makes the first connection; resolves once it succeeded or failed. */
  async start(): Promise<void> {
    await this.remount();
    await this.supervisor.start();
  }

  /** Stops the server and the mount; the context stays registered (its calls are then `unavailable`). */
  async stop(): Promise<void> {
    await this.supervisor.stop();
    await this.mount?.stop();
    this.mount = undefined;
    await Promise.all(this.retiring);
  }

  /**
   * Accepts held changes (of `tools`, or all; a tool in `digests` only while its held definition
   * has that digest): stores them, tells the audit trail, registers again.
   */
  async accept(
    tools: readonly string[] | undefined,
    by: string | undefined,
    digests?: Readonly<Record<string, string>>,
  ): Promise<string[]> {
    const events = acceptHeld(this.server.name, this.pins, tools, by, digests);
    if (events.length === 0) return [];
    await this.options.pins.save(this.server.name, this.pins.accepted);
    this.publish(events);
    await this.rebuild();
    return events.map((e) => e.tool);
  }

  /**
   * What `$introspect` adds: state, server, tools with digests, held changes (each with the
   * definition listed and the one accepted, so an operator sees what changed), tools left out.
   */
  describe(): Record<string, unknown> {
    const p = this.projection;
    return {
      state: this.supervisor.state,
      server: { name: this.identity.name, version: this.identity.version, title: this.identity.title },
      restarts: this.supervisor.restarts,
      ...(this.supervisor.lastError !== undefined && { lastError: this.supervisor.lastError }),
      ...(this.supervisor.auth !== undefined && { oauth: this.supervisor.auth.describe() }),
      tools: (p?.tools ?? []).map((t) => ({
        tool: t.tool,
        name: t.name,
        op: t.op,
        digest: t.pin.digest,
        gated: t.gated,
        ...(t.pin.definition.outputSchema !== undefined && { outputSchema: t.pin.definition.outputSchema }),
        ...(this.pins.held.has(t.tool) && { held: true }),
      })),
      held: heldShown(this.pins),
      leftOut: p?.leftOut ?? [],
    };
  }

  /** A call of a hosted tool: refused while its change is held or the server is down. */
  async call(tool: HostedTool, args: Record<string, unknown>, ctx: OpContext): Promise<HostReply> {
    if (this.pins.held.get(tool.tool)?.change === 'changed') await this.catchUp();
    if (this.pins.held.get(tool.tool)?.change === 'changed')
      throw new ConflictError(
        `${this.mountName} tool ${tool.tool}: definition changed, waiting for acceptance (matrix-tools mcp accept ${this.server.name})`,
      );
    const upstream = this.supervisor.connection;
    if (upstream === undefined)
      throw new UnavailableError(
        `${this.mountName} is ${this.supervisor.state}${this.supervisor.lastError ? ` (${this.supervisor.lastError})` : ''}: try again shortly`,
      );
    return callUpstream(upstream, this.mountName, tool.tool, args, ctx, this.server.matrix.timeoutMs);
  }

  /** The hosted tool of an op, or `not_found`. */
  toolOfOp(op: string): HostedTool {
    const tool = this.byOp.get(op);
    if (tool === undefined) throw new NotFoundError(`${this.mountName} has no tool at ${op}`);
    return tool;
  }

  private async connected(upstream: Upstream): Promise<void> {
    this.identity = upstream.identity;
    await this.refresh(upstream);
  }

  /** Reads the tools, compares them with the pins, and serves and registers what is accepted. */
  private async refresh(upstream: Upstream): Promise<void> {
    const listed: Tool[] = await upstream.listTools(this.options.timing.initializeTimeoutMs);
    const stored = await this.options.pins.load(this.server.name);
    const { state, events } = reconcile(
      this.server.name,
      stored ?? new Map(),
      listed,
      this.server.matrix.onChange,
      stored === undefined,
    );
    this.pins = state;
    if (stored === undefined || events.some((e) => e.change !== 'held'))
      await this.options.pins.save(this.server.name, state.accepted);
    this.publish(events);
    await this.rebuild();
  }

  /** A held change another host of this name accepted is accepted here too. */
  private async catchUp(): Promise<void> {
    const stored = await this.options.pins.load(this.server.name);
    if (stored === undefined) return;
    const taken = [...this.pins.held.values()].filter((h) => stored.get(h.tool)?.digest === h.after).map((h) => h.tool);
    if (taken.length === 0) return;
    acceptHeld(this.server.name, this.pins, taken, undefined);
    await this.rebuild();
  }

  /** Projects the accepted tools; mounts again when the ops changed; registers the context. */
  private async rebuild(): Promise<void> {
    const projection = projectServer(this.server.name, this.server.matrix, this.identity, this.pins.accepted);
    this.projection = projection;
    this.byOp = new Map(projection.tools.map((t) => [t.op, t]));
    for (const { tool, reason } of projection.leftOut)
      this.options.logger.info(`${this.mountName}: tool ${tool} left out: ${reason}`);
    await this.remount();
    await this.options.registrar?.register(projection.spec);
  }

  /**
   * A mount's ops are fixed when it is made: when they change, a new mount joins the queue
   * group before the old one drains, so no request finds nobody.
   */
  private async remount(): Promise<void> {
    const ops = [...this.byOp.keys()].sort();
    const digest = digestOf(ops);
    if (this.mount !== undefined && digest === this.opsDigest) return;
    const next = new Mount(this.nc, {
      name: this.mountName,
      version: HOST_VERSION,
      description: `The MCP server ${this.server.name}, hosted on the bus.`,
      ops: hostOps(this, ops),
      describe: () => this.describe(),
      logger: this.options.logger,
    });
    await next.start();
    const previous = this.mount;
    this.mount = next;
    this.opsDigest = digest;
    // Not awaited: the request that made this change (an `$accept`) is in flight on the old mount,
    // whose drain waits for it. `stop()` waits for every retiring mount.
    if (previous !== undefined) {
      const retiring = previous.stop().finally(() => this.retiring.delete(retiring));
      this.retiring.add(retiring);
    }
  }

  private publish(events: readonly DefinitionEvent[]): void {
    for (const e of events) {
      this.options.logger.info(`${this.mountName}: tool ${e.tool} ${e.change}`, { before: e.before, after: e.after });
      try {
        const named: DefinitionEvent = { ...e, name: llmNameOf(this.server.matrix.prefix, e.tool) };
        this.nc.publish(definitionEventSubject(this.server.name), encodeBody(named));
      } catch {
        // The log line above holds it when the connection cannot.
      }
    }
  }
}
