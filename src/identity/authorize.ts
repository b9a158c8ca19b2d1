/**
 * A request body against its grant: the grant's authority (profile, worker, skills, refs,
 * requires, environment) is the session's; the body may repeat it or leave it out, never ask
 * for other. Presentation (`format`, `strict`, `onlyAvailable`, `defer`) stays the caller's.
 */
import type { ResolveRequest } from '../registry/types.js';
import { GrantError } from './errors.js';
import { AUTHORITY_FIELDS, GrantFailure, type VerifiedGrant } from './types.js';

// One request object per grant and presentation, frozen: the dispatcher's session cache and the
// registry's resolution cache then find it by identity, without serialising it on every call.
const requestsByGrant = new WeakMap<VerifiedGrant, Map<string, ResolveRequest>>();
// Frozen bodies (a mount hands the same one for the same bytes) already admitted under a grant.
const admittedBodies = new WeakMap<VerifiedGrant, WeakMap<object, ResolveRequest>>();

/** The request to resolve for a body under a grant; a GrantError when the body asks for other authority. */
export function grantedRequest(grant: VerifiedGrant, body: ResolveRequest): ResolveRequest {
  const known = admittedBodies.get(grant)?.get(body);
  if (known !== undefined) return known;
  const request = checkedRequest(grant, body);
  if (Object.isFrozen(body)) {
    let bodies = admittedBodies.get(grant);
    if (bodies === undefined) {
      bodies = new WeakMap();
      admittedBodies.set(grant, bodies);
    }
    bodies.set(body, request);
  }
  return request;
}

function checkedRequest(grant: VerifiedGrant, body: ResolveRequest): ResolveRequest {
  const authority = grant.claims.nats.resolve;
  for (const field of AUTHORITY_FIELDS) {
    const asked = body[field];
    if (asked !== undefined && !sameValue(asked, authority[field])) {
      throw new GrantError(
        GrantFailure.Authority,
        `the request asks for other authority than its Matrix-Grant: ${field} ${JSON.stringify(asked).slice(0, 200)}, where the grant gives ${JSON.stringify(authority[field] ?? null).slice(0, 200)}`,
      );
    }
  }
  const defer = body.defer === undefined ? '' : JSON.stringify(body.defer);
  const key = `${body.format ?? ''}|${body.strict ?? ''}|${body.onlyAvailable ?? ''}|${defer}`;
  let requests = requestsByGrant.get(grant);
  if (requests === undefined) {
    requests = new Map();
    requestsByGrant.set(grant, requests);
  }
  let request = requests.get(key);
  if (request === undefined) {
    request = { ...authority };
    if (body.format !== undefined) request.format = body.format;
    if (body.strict !== undefined) request.strict = body.strict;
    if (body.onlyAvailable !== undefined) request.onlyAvailable = body.onlyAvailable;
    if (body.defer !== undefined) request.defer = body.defer;
    requests.set(key, Object.freeze(request));
  }
  return request;
}

/** Deep equality of JSON values (arrays in order: refs and skills merge in order). */
export function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const other = b as unknown[];
    return a.length === other.length && a.every((x, i) => sameValue(x, other[i]));
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const keys = Object.keys(ao).filter((k) => ao[k] !== undefined);
  return (
    keys.length === Object.keys(bo).filter((k) => bo[k] !== undefined).length &&
    keys.every((k) => sameValue(ao[k], bo[k]))
  );
}
