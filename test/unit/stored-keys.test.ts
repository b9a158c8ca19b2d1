/**
 * The KV keys tasks and approvals are stored under: hex of a SHA-256, cut. A bucket outlives the
 * process that wrote it, so the same owner and call give the same key in every version: these
 * are the keys of a bucket written before.
 */
import { describe, expect, it } from 'vitest';
import { keyOfCall } from '../../src/approvals/store.js';
import { ownerToken, taskKey } from '../../src/tasks/store.js';

describe('the stored keys of tasks and approvals', () => {
  it("name a task by its owner's principal and session, hashed: 32 hex digits", () => {
    expect(ownerToken({ principal: 'agent:a', session: 's-1' })).toBe('db2078d87a83844daa5280fc270fcc96');
    expect(ownerToken({})).toBe('6e340b9cffb37a989ca544e6bb780a2c');
    expect(taskKey({ principal: 'agent:a', session: 's-1' }, 't1')).toBe('db2078d87a83844daa5280fc270fcc96.t1');
  });

  it("name an approval by its call's principal, session and call id, hashed: 20 hex digits", () => {
    const request = { callId: 'call-1', tool: 't', target: 'app.x', op: '$x', arguments: {} };
    expect(keyOfCall({ ...request, principal: 'agent:a', session: 's-1' })).toBe('call.78836eb38d1a0d447644');
  });
});
