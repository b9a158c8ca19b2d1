/**
 * Pinned definitions (PROTOCOL 12): the definitions of a server's tools first accepted are the
 * ones agents see. A tool listed later with another description, schema or annotations is held
 * until an operator accepts it; a new tool waits the same way; a removed tool leaves at once.
 * The accepted definitions live in a KV bucket (one key per server), so a restarted host, or a
 * second host of the same name, keeps the same pins.
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { ConflictError } from '../../bus/errors.js';
import { Bucket } from '../../bus/kv.js';
import { digestOf } from '../../registry/canonical.js';
import type { OnChange } from './config.js';

/** The KV bucket of accepted definitions. */
export const PINS_BUCKET = 'matrix-mcp-pins';

/** What of a tool is pinned: everything an agent reads or that decides approval. */
export interface Definition {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Tool['inputSchema'];
  outputSchema?: Tool['outputSchema'];
  annotations?: Tool['annotations'];
}

/** An accepted definition and its digest. */
export interface Pin {
  definition: Definition;
  /** SHA-256 of the canonical JSON of the definition. */
  digest: string;
}

/** A listed definition that differs from the accepted one (or has none), waiting for acceptance. */
export interface HeldChange {
  tool: string;
  change: 'added' | 'changed';
  /** Digest of the accepted definition; absent for a new tool. */
  before?: string;
  after: string;
  definition: Definition;
}

/** One change to a server's definitions, for the audit trail. */
export interface DefinitionEvent {
  server: string;
  tool: string;
  change: 'added' | 'changed' | 'removed' | 'held' | 'accepted';
  before?: string;
  after?: string;
  /** Who accepted, when an operator did. */
  by?: string;
  at: string;
  /** The tool's name as agents see it (the server's prefix and the MCP name); set as it is published. */
  name?: string;
}

/** The pinned state of one server. */
export interface PinState {
  accepted: Map<string, Pin>;
  held: Map<string, HeldChange>;
}

/** The definition of a tool as listed, and its digest. */
export function pinOf(tool: Tool): Pin {
  const definition: Definition = { name: tool.name, inputSchema: tool.inputSchema };
  if (tool.title !== undefined) definition.title = tool.title;
  if (tool.description !== undefined) definition.description = tool.description;
  if (tool.outputSchema !== undefined) definition.outputSchema = tool.outputSchema;
  if (tool.annotations !== undefined) definition.annotations = tool.annotations;
  return { definition, digest: digestOf(definition) };
}

/**
 * Compares the tools a server lists with the accepted ones: equal ones stay; removed ones leave;
 * changed and new ones are held, or accepted at once with `onChange: "accept"` or when nothing was
 * ever accepted for this server (`firstSight`: the first listing is what an operator mounted).
 */
export function reconcile(
  server: string,
  accepted: ReadonlyMap<string, Pin>,
  listed: readonly Tool[],
  onChange: OnChange,
  firstSight: boolean,
): { state: PinState; events: DefinitionEvent[] } {
  const at = new Date().toISOString();
  const next = new Map<string, Pin>();
  const held = new Map<string, HeldChange>();
  const events: DefinitionEvent[] = [];
  const seen = new Set<string>();
  for (const tool of listed) {
    seen.add(tool.name);
    const pin = pinOf(tool);
    const before = accepted.get(tool.name);
    if (before?.digest === pin.digest) {
      next.set(tool.name, before);
      continue;
    }
    const change = before === undefined ? 'added' : 'changed';
    if (firstSight || onChange === 'accept') {
      next.set(tool.name, pin);
      if (!firstSight) events.push(event(server, tool.name, change, before?.digest, pin.digest, at));
      continue;
    }
    if (before !== undefined) next.set(tool.name, before);
    held.set(tool.name, {
      tool: tool.name,
      change,
      after: pin.digest,
      definition: pin.definition,
      ...digestBefore(before),
    });
    events.push(event(server, tool.name, 'held', before?.digest, pin.digest, at));
  }
  for (const [name, pin] of accepted)
    if (!seen.has(name)) events.push(event(server, name, 'removed', pin.digest, undefined, at));
  return { state: { accepted: next, held }, events };
}

/**
 * Accepts the held changes of `tools` (all when absent): their listed definitions become the pins.
 * A tool named in `digests` is accepted only while its held definition still has that digest
 * (`after`): what a person looked at, not a change the server listed since.
 */
export function acceptHeld(
  server: string,
  state: PinState,
  tools: readonly string[] | undefined,
  by: string | undefined,
  digests: Readonly<Record<string, string>> = {},
): DefinitionEvent[] {
  const at = new Date().toISOString();
  const events: DefinitionEvent[] = [];
  for (const [name, change] of [...state.held]) {
    if (tools !== undefined && !tools.includes(name)) continue;
    if (Object.hasOwn(digests, name) && digests[name] !== change.after) continue;
    state.accepted.set(name, { definition: change.definition, digest: change.after });
    state.held.delete(name);
    const e = event(server, name, 'accepted', change.before, change.after, at);
    if (by !== undefined) e.by = by;
    events.push(e);
  }
  return events;
}

/** Where a server's accepted definitions are kept: KV when JetStream answers, else this process. */
export class PinStore {
  private constructor(private readonly bucket: Bucket | undefined) {}

  /** The store on `bucket` (default `PINS_BUCKET`), or one in memory (said by `durable`) when JetStream is off. */
  static async open(
    nc: Parameters<typeof Bucket.open>[0],
    { bucket = PINS_BUCKET, replicas = 1 }: { bucket?: string; replicas?: number } = {},
  ): Promise<PinStore> {
    try {
      return new PinStore(await Bucket.open(nc, bucket, { replicas, history: 1 }));
    } catch {
      return new PinStore(undefined);
    }
  }

  private readonly memory = new Map<string, Map<string, Pin>>();

  /** Whether pins outlive this process. */
  get durable(): boolean {
    return this.bucket !== undefined;
  }

  /** The accepted definitions of `server`, or undefined when none were ever stored. */
  async load(server: string): Promise<Map<string, Pin> | undefined> {
    if (this.bucket === undefined) return this.memory.get(server);
    const entry = await this.bucket.get(server);
    if (entry === null || entry.operation !== 'PUT') return undefined;
    const stored = JSON.parse(Buffer.from(entry.value).toString('utf8')) as Record<string, Pin>;
    return new Map(Object.entries(stored));
  }

  /** Stores the accepted definitions of `server` (last writer wins: both hosts saw the same listing). */
  async save(server: string, accepted: ReadonlyMap<string, Pin>): Promise<void> {
    if (this.bucket === undefined) {
      this.memory.set(server, new Map(accepted));
      return;
    }
    const bytes = Buffer.from(JSON.stringify(Object.fromEntries(accepted)), 'utf8');
    try {
      await this.bucket.put(server, bytes);
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
    }
  }
}

function event(
  server: string,
  tool: string,
  change: DefinitionEvent['change'],
  before: string | undefined,
  after: string | undefined,
  at: string,
): DefinitionEvent {
  const e: DefinitionEvent = { server, tool, change, at };
  if (before !== undefined) e.before = before;
  if (after !== undefined) e.after = after;
  return e;
}

function digestBefore(before: Pin | undefined): { before?: string } {
  return before === undefined ? {} : { before: before.digest };
}
