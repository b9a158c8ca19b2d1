/**
 * Hashing the registry, the dispatcher and the approvals share: SHA-256 of a text, and the
 * cache key of a session request.
 */
import { hash } from 'node:crypto';
import { PayloadTooLargeError } from './errors.js';

/** SHA-256, hex, of a string (one-shot: no Hash object). */
export function sha256Hex(text: string): string {
  return hash('sha256', text, 'hex');
}

/**
 * Most characters of a session (`$resolve`) request's JSON text. A real one names a profile,
 * a worker, a few dozen skills and refs: a few KB. 64 KiB leaves room for 500 refs of the
 * longest key (128 characters) while a request can no longer make every cache that keys by it
 * hold half a megabyte per entry.
 */
export const MAX_SESSION_REQUEST_CHARS = 64 * 1024;

/** Keys up to this length are used as they are; longer ones by their SHA-256. */
const LONGEST_PLAIN_KEY = 1024;

/**
 * The cache key of a session request's JSON text: the text itself when short (no hashing on
 * the common path), else its SHA-256 (64 bytes held instead of the text). `PayloadTooLargeError`
 * past `maxChars`.
 */
export function sessionKey(text: string, maxChars = MAX_SESSION_REQUEST_CHARS): string {
  if (text.length > maxChars) {
    throw new PayloadTooLargeError(
      `the session request is ${text.length} characters of JSON, over the limit of ${maxChars}: name fewer skills and refs (a context can be referenced once)`,
    );
  }
  // JSON text of an object starts with `{`: a hash key can never equal a plain one.
  return text.length <= LONGEST_PLAIN_KEY ? text : `#${sha256Hex(text)}`;
}
