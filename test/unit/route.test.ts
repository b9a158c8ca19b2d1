import { describe, expect, it } from 'vitest';
import {
  BadRequestError,
  InternalError,
  NoRespondersError,
  ReplyShapeError,
  TargetFloodError,
  TimeoutError,
  UnavailableError,
} from '../../src/bus/errors.js';
import { targetFailed } from '../../src/dispatcher/results.js';
import { retryDelay, route, TargetSlots } from '../../src/dispatcher/route.js';
import type { ResolvedTool } from '../../src/registry/types.js';

const tool = (extra: Partial<ResolvedTool> = {}): ResolvedTool => ({
  name: 't',
  description: 't',
  inputSchema: { type: 'object' },
  target: 'app.x',
  op: '$do',
  resultMode: 'json',
  requiresApproval: false,
  context: 'c',
  ...extra,
});
const policy = { maxAttempts: 3, backoffMs: 5 };
const later = () => Date.now() + 10_000;
const retried = (t: ResolvedTool, err: unknown, attempt = 1, deadline = later()) =>
  retryDelay(route(t, {}, 30_000), err, attempt, deadline, policy) !== undefined;

describe('when a failed request is sent again', () => {
  const idempotent = tool({ annotations: { idempotent: true } });

  it('after no responders, for any tool not gated: nobody received it', () => {
    expect(retried(tool(), new NoRespondersError('none'))).toBe(true);
    // Gated: one approval, one request, whatever comes back (the target can forge "no responders").
    expect(retried(tool({ requiresApproval: true }), new NoRespondersError('none'))).toBe(false);
  });

  it('after an answer, a mount’s own 503 included, only for an idempotent tool that is not gated', () => {
    for (const err of [new UnavailableError('busy'), new InternalError('down')]) {
      expect(retried(tool(), err)).toBe(false);
      expect(retried(idempotent, err)).toBe(true);
      expect(retried({ ...idempotent, requiresApproval: true }, err)).toBe(false);
    }
    expect(retried(idempotent, new BadRequestError('no'))).toBe(false);
  });

  it('never after a timeout, a target that flooded its reply, past the last attempt, or past the deadline', () => {
    expect(retried(idempotent, new TimeoutError('late'))).toBe(false);
    // An UnavailableError, but its target would flood the next request too.
    expect(retried(idempotent, new TargetFloodError('app.x sent 1001 messages'))).toBe(false);
    // An InternalError, but its target would answer the next request with the same shape.
    expect(retried(idempotent, new ReplyShapeError('app.x.$do answered a reply refused unread for its shape'))).toBe(
      false,
    );
    expect(retried(idempotent, new NoRespondersError('none'), 3)).toBe(false);
    expect(retried(idempotent, new NoRespondersError('none'), 1, Date.now())).toBe(false);
  });

  it('tells the model of an approved call without an answer that it may have run, not to try again', () => {
    const to = { subject: 'app.x.$do', timeoutMs: 1_000 };
    expect(targetFailed('pay', { ...to, sentOnce: true }, new NoRespondersError('none')).message).toMatch(
      /may or may not have run\. Check its effect/,
    );
    expect(targetFailed('pay', { ...to, sentOnce: false }, new NoRespondersError('none')).message).toMatch(
      /Try again later/,
    );
  });

  it('tells the model of a reply refused for its shape that its target is to blame, and not to send it again', () => {
    const to = { subject: 'app.x.$do', timeoutMs: 1_000, sentOnce: false };
    const refused = new ReplyShapeError(
      'app.x.$do answered a reply refused unread for its shape: reply nests deeper than 128 levels',
    );
    const failed = targetFailed('deep', to, refused);
    expect(failed.code).toBe('internal');
    expect(failed.message).toBe(
      '"deep" failed: app.x.$do answered a reply refused unread for its shape: reply nests deeper than 128 levels. Its target misbehaves; the call may have run, and was not sent again. Use another tool, or tell whoever runs app.x.$do.',
    );
  });

  it('never for matrix_invoke, idempotent or not: one approval, one request', () => {
    const invoke = tool({
      target: 'system.dispatcher',
      op: '$invoke',
      requiresApproval: false,
      annotations: { idempotent: true },
      allowTargets: ['>'],
    });
    const to = route(invoke, { target: 'app.notes', op: '$update' }, 30_000);
    expect(to).toMatchObject({ target: 'app.notes', op: '$update', gated: true, idempotent: false });
    expect(retryDelay(to, new UnavailableError('busy'), 1, later(), policy)).toBeUndefined();
  });
});

describe('calls in flight per target', () => {
  it('takes slots up to the bound and counts what is given back', () => {
    const slots = new TargetSlots(2);
    expect([slots.take('a'), slots.take('a'), slots.take('a'), slots.take('b')]).toEqual([
      undefined,
      undefined,
      'target',
      undefined,
    ]);
    slots.give('a');
    slots.give('a');
    expect([slots.count('a'), slots.count('b')]).toEqual([0, 1]);
  });

  it("holds each principal to its share of a target's slots; calls without one only to the target's bound", () => {
    const slots = new TargetSlots(4, 2);
    expect([slots.take('a', 'p'), slots.take('a', 'p'), slots.take('a', 'p'), slots.take('b', 'p')]).toEqual([
      undefined,
      undefined,
      'caller',
      undefined,
    ]);
    expect([slots.take('a', 'q'), slots.take('a'), slots.take('a', 'r')]).toEqual([undefined, undefined, 'target']);
    expect([slots.count('a'), slots.count('a', 'p'), slots.count('a', 'q')]).toEqual([4, 2, 1]);
    slots.give('a', 'p');
    expect(slots.take('a', 'p')).toBeUndefined();
    // By default a principal's share is a quarter of the bound.
    const quarter = new TargetSlots(8);
    expect([quarter.take('a', 'p'), quarter.take('a', 'p'), quarter.take('a', 'p')]).toEqual([
      undefined,
      undefined,
      'caller',
    ]);
  });
});
