/**
 * Which sessions a caller may see. A caller that names its own session (`Matrix-Session`, which
 * the dispatcher sets from a verified grant) acts on that one, and reads also those its grant
 * lists (`Matrix-Read-Sessions`); a caller without one (an operator, a service) is kept off the
 * reference mounts by NATS permissions, not here, and sees them all.
 */
import { ForbiddenError } from '../bus/errors.js';
import type { OpContext } from '../bus/mount.js';

/** Sessions besides its own that the caller may read (`Matrix-Read-Sessions`, from its grant). */
function readableBy(ctx: OpContext): string[] {
  return ctx.readSessions === undefined ? [] : ctx.readSessions.split(',').map((s) => s.trim());
}

/**
 * The session a request is about: `given`, when the caller may `action` it (its own, or for
 * `read` one its grant lists), else the caller's own; `forbidden` for any other. Undefined when
 * neither names one.
 */
export function sessionInScope(
  given: string | undefined,
  ctx: OpContext,
  action: 'read' | 'write',
): string | undefined {
  if (
    given !== undefined &&
    ctx.session !== undefined &&
    given !== ctx.session &&
    !(action === 'read' && readableBy(ctx).includes(given))
  ) {
    throw new ForbiddenError(
      `session ${ctx.session} may not ${action} session ${given}: only its own${action === 'read' ? ', and those its grant names in readSessions' : ''}`,
    );
  }
  return given ?? ctx.session;
}
