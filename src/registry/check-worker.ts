/**
 * The registration checker's thread: runs `registrationError` (schema compiles, meta-schema,
 * fit in every provider format) for `RegistrationChecker`, one request at a time, so that the
 * event loop that serves calls never holds for a spec's checks.
 */
import { serveThread } from '../worker-thread.js';
import type { CheckRequest, CheckResult } from './checker.js';
import { registrationError } from './validate.js';

serveThread<CheckRequest, CheckResult>((request) => {
  const error = registrationError(JSON.parse(request.specText), request.check);
  return error === undefined ? {} : { error: { code: error.code, message: error.message, details: error.details } };
});
