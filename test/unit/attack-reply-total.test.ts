/**
 * Attack (issue 41, docs/target-traffic.md "A target's replies in flight are bounded in bytes ...
 * (one principal: a quarter ...), or the calls in flight of all targets together would reserve
 * more than 48 MiB"): the 48 MiB of all targets is shared by every principal with no share of its
 * own (src/dispatcher/reply-budget.ts:175, `fitsTarget` checks `this.total` alone; the share of
 * :182 is per target). One principal calling 12 mounts that never answer (each new, so each call
 * reserves max_payload, 1 MiB, for its whole deadline; 4 per mount is its per-target share) holds
 * all 48 MiB at no cost: nothing is sent. Every other principal's calls to every other target are
 * then held to one in flight per target; a second waits out its deadline and is refused
 * (`repliesInFlight`), though that target and that caller did nothing wrong. The 12 mounts may be
 * one MCP host's servers (mcp.<name>, each a target), or any slow tools with large replies.
 * What should hold: a principal's calls hold no more than a share of the total (as of a target's
 * budget), so another principal's second call to an honest target is admitted.
 */
import { describe, expect, it } from 'vitest';
import { ReplyBudget } from '../../src/dispatcher/reply-budget.js';

const MiB = 2 ** 20;

describe('ReplyBudget under one principal filling the total', () => {
  it("admits another principal's second call to an honest target while one principal holds calls to 12 silent mounts", async () => {
    // The dispatcher's defaults: 16 MiB per target, a quarter per principal, max_payload 1 MiB, 48 MiB in all.
    const budget = new ReplyBudget(16 * MiB, 4 * MiB, () => MiB);
    const far = Date.now() + 60_000;
    // The honest target answers small: its replies are taken to be small.
    for (let i = 0; i < 12; i++) {
      expect(budget.admit('app.honest', 'agent:victim', far)).toBeUndefined();
      budget.release('app.honest', 'agent:victim', 300);
    }
    // The attacker: 4 calls (its per-target share) to each of 12 mounts that never answer.
    let held = 0;
    for (let m = 0; m < 12; m++)
      for (let i = 0; i < 4; i++) if (budget.admit(`mcp.silent${m}`, 'agent:attacker', far) === undefined) held++;
    expect(held).toBe(48);
    // The victim: two calls at once to the honest target.
    expect(budget.admit('app.honest', 'agent:victim', far)).toBeUndefined();
    const second = budget.admit('app.honest', 'agent:victim', Date.now() + 200);
    // What should hold: admitted now (the attacker has no more than a share of the total) ...
    expect(second).toBeUndefined();
    // ... and never refused at its deadline for the attacker's silent calls.
    if (second !== undefined) expect(await second).toBeUndefined();
  });
});
