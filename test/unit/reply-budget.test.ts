/**
 * The bytes of replies a target may have in flight (dispatcher/reply-budget.ts): a target whose
 * replies are large has few calls in flight, each principal a share; the rest wait in order and
 * are admitted as replies come back; a target answering small replies is soon bound by nothing
 * here. What broke without it: 64 calls answered with ~1 MB each made nats-server cut the
 * service's connection to targets (test/system/attack-target-bytes.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { ReplyBudget } from '../../src/dispatcher/reply-budget.js';

const MiB = 2 ** 20;

describe('ReplyBudget', () => {
  it('admits (budget / reply size) calls, a quarter of them per principal, and the rest as replies come back', async () => {
    const budget = new ReplyBudget(16 * MiB, 4 * MiB, () => MiB);
    const far = Date.now() + 60_000;
    // A new target's replies are taken to be max_payload: 4 calls of one principal, 16 in all.
    for (let i = 0; i < 4; i++) expect(budget.admit('app.big', 'agent:a', far)).toBeUndefined();
    const fifth = budget.admit('app.big', 'agent:a', far);
    expect(fifth).toBeInstanceOf(Promise);
    for (let i = 0; i < 4; i++) expect(budget.admit('app.big', `agent:${i}`, far)).toBeUndefined();
    expect(budget.waiting('app.big')).toBe(1);
    // A reply back: the waiting call takes its place.
    budget.release('app.big', 'agent:a', MiB);
    expect(await fifth).toBeUndefined();
    expect(budget.waiting('app.big')).toBe(0);
  });

  it('gives up a wait at its deadline or its signal, holding nothing', async () => {
    const budget = new ReplyBudget(2 * MiB, 2 * MiB, () => MiB);
    expect(budget.admit('app.big', undefined, Date.now() + 60_000)).toBeUndefined();
    expect(budget.admit('app.big', undefined, Date.now() + 60_000)).toBeUndefined();
    expect(await budget.admit('app.big', undefined, Date.now() + 20)).toBe('deadline');
    const stop = new AbortController();
    const waiting = budget.admit('app.big', undefined, Date.now() + 60_000, stop.signal);
    stop.abort();
    expect(await waiting).toBe('cancelled');
    expect(budget.waiting('app.big')).toBe(0);
  });

  it('takes a target answering small replies to be small after a dozen', () => {
    const budget = new ReplyBudget(16 * MiB, 4 * MiB, () => MiB);
    const far = Date.now() + 60_000;
    for (let i = 0; i < 12; i++) {
      expect(budget.admit('app.small', 'agent:a', far)).toBeUndefined();
      budget.release('app.small', 'agent:a', 300);
    }
    expect(budget.sizeOf('app.small')).toBeLessThan(1024);
    // Now 1,000 calls of one principal fit (what bounds them is TargetSlots).
    for (let i = 0; i < 1000; i++) expect(budget.admit('app.small', 'agent:a', far)).toBeUndefined();
    // One large reply and it is large again.
    budget.release('app.small', 'agent:a', MiB);
    expect(budget.sizeOf('app.small')).toBe(MiB);
  });

  it('bounds the replies in flight of all targets together, one call of an idle target always admitted', async () => {
    const budget = new ReplyBudget(16 * MiB, 16 * MiB, () => MiB, 24 * MiB);
    const far = Date.now() + 60_000;
    // Two targets of ~1 MiB replies, 12 calls each: the total of 24 MiB is full.
    for (let i = 0; i < 12; i++) expect(budget.admit('app.a', undefined, far)).toBeUndefined();
    for (let i = 0; i < 12; i++) expect(budget.admit('app.b', undefined, far)).toBeUndefined();
    const waiting = budget.admit('app.b', undefined, far);
    expect(waiting).toBeInstanceOf(Promise);
    // A third target's first call goes (at most one max_payload); its second waits.
    expect(budget.admit('app.c', undefined, far)).toBeUndefined();
    const third = budget.admit('app.c', undefined, far);
    expect(third).toBeInstanceOf(Promise);
    // Replies back from app.a make room for the others, in whichever target they wait (25 MiB
    // reserved, 2 more wanted: 3 replies).
    for (let i = 0; i < 3; i++) budget.release('app.a', undefined, MiB);
    expect(await waiting).toBeUndefined();
    expect(await third).toBeUndefined();
  });

  it("tells which bound holds a call back: the target, the principal's share, or the total", () => {
    const budget = new ReplyBudget(4 * MiB, 2 * MiB, () => MiB, 6 * MiB);
    const far = Date.now() + 60_000;
    for (let i = 0; i < 2; i++) expect(budget.admit('app.a', 'agent:a', far)).toBeUndefined();
    expect(budget.boundOf('app.a', 'agent:a')).toBe('share');
    for (let i = 0; i < 2; i++) expect(budget.admit('app.a', 'agent:b', far)).toBeUndefined();
    expect(budget.boundOf('app.a', 'agent:c')).toBe('target');
    // 6 MiB in all: app.b's second call is held by the total, though app.b has room ...
    expect(budget.admit('app.b', 'agent:a', far)).toBeUndefined();
    expect(budget.admit('app.b', 'agent:b', far)).toBeUndefined();
    expect(budget.boundOf('app.b', 'agent:a')).toBe('total');
    // ... but not a principal holding less than a share in all: it is admitted past the total.
    expect(budget.boundOf('app.b', 'agent:c')).toBeUndefined();
    expect(budget.admit('app.b', 'agent:c', far)).toBeUndefined();
  });
});
