import { describe, expect, it } from 'vitest';
import { covered, isOwn, mayAnswer } from '../../src/approvals/approvers.js';
import { decideByPolicy } from '../../src/approvals/policy.js';
import type { PendingApproval } from '../../src/approvals/types.js';
import { principalKey, samePrincipal } from '../../src/identity/principal.js';

const approval = (principal: string): PendingApproval => ({
  approvalId: 'a-1',
  callId: 'c-1',
  tool: 'write_note',
  target: 'app.notes',
  op: '$write',
  arguments: {},
  argumentsDigest: 'd',
  argumentsBytes: 2,
  principal,
  requestedAt: '2026-12-06T00:00:00.000Z',
  expiresAt: '2026-12-06T01:00:00.000Z',
});

/** Spellings of `agent:alpha` a reader takes for it. */
const LOOKALIKES = [
  'Agent:Alpha',
  'AGENT:ALPHA',
  'agent:alpha ',
  ' agent:alpha',
  'agent:\u0430lpha', // Cyrillic а
  'agent:alph\u0430',
  'agent:\u03b1lpha', // Greek α
  'agent:al\u200bpha', // a zero-width space
  'ａｇｅｎｔ:ａｌｐｈａ', // full-width
  'agent:\u0251lpha', // Latin alpha ɑ
  'agent:aIpha', // capital I for l
  'agent:alp\u0570a', // Armenian հ
  'agent:alpha\u2800', // braille blank
  'agent:a\ua4f2pha', // Lisu ꓲ
];

describe('principals compared as a reader sees them', () => {
  it('folds case, white space, compatibility forms, invisible characters and lookalike letters', () => {
    for (const spelling of LOOKALIKES)
      expect(principalKey(spelling), JSON.stringify(spelling)).toBe(principalKey('agent:alpha'));
    expect(samePrincipal('agent:alpha', 'agent:alpha2')).toBe(false);
    expect(samePrincipal('agent:alpha', undefined)).toBe(false);
  });

  it('never lets a principal approve its own call under another spelling of it', () => {
    for (const spelling of LOOKALIKES) {
      const call = approval(spelling);
      expect(isOwn({ by: 'agent:alpha', covers: undefined }, call), JSON.stringify(spelling)).toBe(true);
      expect(mayAnswer({ by: 'agent:alpha', covers: undefined }, call), JSON.stringify(spelling)).toBe(false);
    }
    expect(mayAnswer({ by: 'user:ops', covers: undefined }, approval('Agent:Alpha'))).toBe(true);
  });

  it("matches an approver's principals globs and a policy's principal rules on the folded form", () => {
    const claim = { principals: ['agent:a*'] };
    for (const spelling of LOOKALIKES) expect(covered(claim, approval(spelling)), JSON.stringify(spelling)).toBe(true);
    expect(covered(claim, approval('user:alpha'))).toBe(false);
    const policy = { rules: [{ principal: 'agent:alpha', decision: 'deny' as const }], default: 'allow' as const };
    const request = { callId: 'c', tool: 't', target: 'app.x', op: '$do', arguments: {} };
    for (const spelling of LOOKALIKES)
      expect(decideByPolicy(policy, { ...request, principal: spelling }).decision, JSON.stringify(spelling)).toBe(
        'deny',
      );
  });
});
