/**
 * Changes to the pinned definitions of hosted MCP servers, into the audit trail (PROTOCOL 12).
 * The host publishes each on `mcp.<name>.events.definition`, which its NATS user may publish,
 * while only the service writes the trail (`deploy/nats.conf`): the dispatcher instances hear
 * them in one queue group, so each change is stored once, as an event of its own (no call's)
 * with the digests before and after.
 */
import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/nats-core';
import { decodeBody } from '../bus/codec.js';
import { guarded } from '../bus/subjects.js';
import { type CallEvent, DEFINITION_CHANGES, type DefinitionChange, newCallEvent } from './events.js';
import type { AuditLog } from './log.js';

/** The subjects of every hosted server's definition events. */
export const DEFINITION_EVENTS = 'mcp.*.events.definition';
/** The queue group of the instances that store them: one stores each. */
export const DEFINITION_AUDIT_QUEUE = 'matrix-definition-audit';

const SHA256_HEX = /^[0-9a-f]{64}$/;
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
/** Longest server name, MCP tool name, principal and time a stored event keeps, in characters. */
const MAX_TEXT = 256;

/**
 * Stores every definition event heard on `DEFINITION_EVENTS` in the trail through `log`;
 * returns a function that stops. One that is not a definition event is dropped: the host's
 * user, the only one that may publish there besides the service, never sends one.
 */
export function recordDefinitionChanges(nc: NatsConnection, log: AuditLog): () => void {
  const sub = nc.subscribe(DEFINITION_EVENTS, {
    queue: DEFINITION_AUDIT_QUEUE,
    callback: guarded((err, msg) => {
      if (err !== null) return;
      const event = definitionAuditEvent(msg.subject, msg.data);
      if (event !== undefined) log.record(event, false);
    }),
  });
  return () => sub.unsubscribe();
}

/**
 * The trail's event of one definition event as the host published it on `subject`
 * (`mcp.<name>.events.definition`): `name` the tool as agents see it, `target` the mount,
 * `principal` who accepted it; undefined when the body is no definition event.
 */
export function definitionAuditEvent(subject: string, data: Uint8Array): CallEvent | undefined {
  let body: unknown;
  try {
    body = decodeBody(data);
  } catch {
    return undefined;
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return undefined;
  const b = body as Record<string, unknown>;
  const change = DEFINITION_CHANGES.find((c) => c === b.change);
  if (change === undefined || !text(b.server) || !text(b.tool) || !text(b.at)) return undefined;
  if (!optional(b.before, SHA256_HEX) || !optional(b.after, SHA256_HEX) || !optional(b.name, TOOL_NAME))
    return undefined;
  if (b.by !== undefined && !text(b.by)) return undefined;
  const definition: DefinitionChange = { server: b.server, tool: b.tool, change };
  if (typeof b.before === 'string') definition.before = b.before;
  if (typeof b.after === 'string') definition.after = b.after;
  const event = newCallEvent(`definition-${randomUUID()}`, typeof b.name === 'string' ? b.name : b.tool);
  event.target = subject.slice(0, subject.length - '.events.definition'.length);
  event.principal = typeof b.by === 'string' ? b.by : undefined;
  event.attempts = undefined;
  event.at = b.at;
  event.definition = definition;
  return event;
}

function text(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= MAX_TEXT;
}

function optional(value: unknown, pattern: RegExp): boolean {
  return value === undefined || (typeof value === 'string' && pattern.test(value));
}
