/**
 * `system.sessions`: each session's state, one JetStream KV key per session. `$read` is the
 * target of the built-in `session_state_read`; `$write` merges values (null removes a key).
 * The session is the request's `session`, else its `Matrix-Session` header; a caller with a
 * session of its own reads it and those its grant lists, and writes only its own
 * (`session-scope.ts`).
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { SchemaId } from '../bus/contracts.js';
import { BadRequestError, ConflictError } from '../bus/errors.js';
import { Bucket } from '../bus/kv.js';
import { Mount, type OpContext } from '../bus/mount.js';
import { Mounts } from '../bus/subjects.js';
import { sessionInScope } from './session-scope.js';

/** Default bucket of session state (`MATRIX_SESSIONS_BUCKET`). */
export const DEFAULT_SESSIONS_BUCKET = 'matrix-sessions';

type State = Record<string, unknown>;

/** Builds the `system.sessions` mount over a bucket. */
export async function sessionsMount(nc: NatsConnection, options: { bucket?: string } = {}): Promise<Mount> {
  const bucket = await Bucket.open(nc, options.bucket ?? DEFAULT_SESSIONS_BUCKET);
  const read = async (session: string): Promise<{ state: State; revision: number }> => {
    const entry = await bucket.get(session);
    if (entry === null) return { state: {}, revision: 0 };
    return { state: JSON.parse(new TextDecoder().decode(entry.value)) as State, revision: entry.revision };
  };
  return new Mount(nc, {
    name: Mounts.Sessions,
    version: '0.1.0',
    description: 'Session state, kept in JetStream KV.',
    ops: {
      $read: {
        description: "A session's state; only `keys` when given.",
        request: SchemaId.SessionReadRequest,
        response: SchemaId.SessionReadReply,
        handle: async (request: { session?: string; keys?: string[] }, ctx: OpContext) => {
          const session = sessionOf(request.session, ctx, 'read');
          const { state, revision } = await read(session);
          const picked =
            request.keys === undefined
              ? state
              : Object.fromEntries(request.keys.filter((k) => Object.hasOwn(state, k)).map((k) => [k, state[k]]));
          return { session, state: picked, revision };
        },
      },
      $write: {
        description: "Merges values into a session's state (null removes a key).",
        request: SchemaId.SessionWriteRequest,
        response: SchemaId.SessionWriteReply,
        handle: async (request: { session?: string; values: State; expectedRevision?: number }, ctx: OpContext) => {
          const session = sessionOf(request.session, ctx, 'write');
          // Merge under compare-and-set; retry a lost race unless the caller pinned a revision.
          for (let attempt = 0; ; attempt++) {
            const { state, revision } = await read(session);
            if (request.expectedRevision !== undefined && request.expectedRevision !== revision) {
              throw new ConflictError(`session ${session} is at revision ${revision}, not ${request.expectedRevision}`);
            }
            for (const [k, v] of Object.entries(request.values)) {
              if (v === null) delete state[k];
              else state[k] = v;
            }
            const bytes = new TextEncoder().encode(JSON.stringify(state));
            try {
              const next =
                revision === 0 ? await bucket.create(session, bytes) : await bucket.update(session, bytes, revision);
              return { session, revision: next };
            } catch (err) {
              if (!(err instanceof ConflictError) || request.expectedRevision !== undefined || attempt >= 4) throw err;
            }
          }
        },
      },
    },
  });
}

/** The session a request is about, as `sessionInScope` allows it; it must name one. */
function sessionOf(given: string | undefined, ctx: OpContext, action: 'read' | 'write'): string {
  const session = sessionInScope(given, ctx, action);
  if (session === undefined || !/^[A-Za-z0-9_-]{1,128}$/.test(session)) {
    throw new BadRequestError(
      'name the session: give `session`, or send the Matrix-Session header (letters, digits, _ and -)',
      {
        details: {
          violations: [
            { path: '/session', message: 'is required when no Matrix-Session header names a valid session' },
          ],
        },
      },
    );
  }
  return session;
}
