/**
 * The registration checker's thread: runs `registrationError` (schema compiles, meta-schema,
 * fit in every provider format) for `RegistrationChecker`, one request at a time, so that the
 * event loop that serves calls never holds for a spec's checks.
 */
import { parentPort } from 'node:worker_threads';
import type { CheckRequest, CheckResult } from './checker.js';
import { registrationError } from './validate.js';

const port = parentPort;
if (port === null) throw new Error('check-worker runs as a worker thread');
port.on('message', (request: CheckRequest) => {
  let result: CheckResult;
  try {
    const error = registrationError(JSON.parse(request.specText), request.check);
    result =
      error === undefined
        ? { id: request.id }
        : { id: request.id, error: { code: error.code, message: error.message, details: error.details } };
  } catch (err) {
    result = { id: request.id, failure: (err as Error).message };
  }
  port.postMessage(result);
});
