/** The one error of identity: a `forbidden` that says which check a grant failed. */
import { ForbiddenError } from '../bus/errors.js';
import type { GrantFailure } from './types.js';

/** A grant (or its absence) that does not admit the request; `details.grant` names the failure. */
export class GrantError extends ForbiddenError {
  override name = 'GrantError';
  readonly failure: GrantFailure;
  /**
   * The grant's `sub` and `nats.session` when a trusted issuer's signature on it verified: valid
   * identity when the failure is `authority_mismatch` (the grant holds, the body asked for
   * more), otherwise only whom the issuer once named (it expired, is not valid yet, …).
   */
  subject: string | undefined;
  session: string | undefined;

  constructor(failure: GrantFailure, message: string) {
    // A refusal, not a fault: no stack is captured (12 µs of the ~100 a refused grant costs, in a flood of them).
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message, { details: { grant: failure } });
    Error.stackTraceLimit = limit;
    this.failure = failure;
  }
}
