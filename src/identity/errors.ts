/** The one error of identity: a `forbidden` that says which check a grant failed. */
import { ForbiddenError } from '../bus/errors.js';
import type { GrantFailure } from './types.js';

/** A grant (or its absence) that does not admit the request; `details.grant` names the failure. */
export class GrantError extends ForbiddenError {
  override name = 'GrantError';
  readonly failure: GrantFailure;

  constructor(failure: GrantFailure, message: string) {
    super(message, { details: { grant: failure } });
    this.failure = failure;
  }
}
