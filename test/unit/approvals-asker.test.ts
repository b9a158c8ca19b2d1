import { describe, expect, it } from 'vitest';
import { terminalQuestion } from '../../src/approvals/asker.js';
import type { PendingApproval } from '../../src/approvals/types.js';

/** A pending approval of `deploy` whose arguments and principal the agent chose. */
const approval = (args: Record<string, unknown> | string, principal = 'agent:alpha'): PendingApproval => ({
  approvalId: 'abcdefabcdefabcdef00-000000000001',
  callId: 'c-1',
  tool: 'deploy',
  target: 'app.deploy',
  op: '$deploy',
  arguments: args,
  argumentsDigest: '0'.repeat(64),
  argumentsBytes: 10,
  principal,
  requestedAt: '2026-12-01T00:00:00.000Z',
  expiresAt: '2026-12-01T01:00:00.000Z',
});

describe('the question the terminal asks', () => {
  it('names the call, its arguments, who asks and until when', () => {
    expect(terminalQuestion(approval({ service: 'billing' }))).toBe(
      '\napprove deploy → app.deploy.$deploy {"service":"billing"} for agent:alpha (abcdefabcdefabcdef00-000000000001, until 2026-12-01T01:00:00.000Z)? [y/N] ',
    );
  });

  it('never lets the agent’s C1, bidi or separator characters reach the terminal raw', () => {
    const asked = terminalQuestion(approval({ file: 'report\u202efdp.exe', x: '\u009b2J\u2028' }, 'agent:\u0085x'));
    expect(asked).toContain('"file":"report\\u202efdp.exe"');
    expect(asked).toContain('"x":"\\u009b2J\\u2028"');
    expect(asked).toContain('for agent:\\u0085x');
    expect(asked).not.toMatch(/[\u0080-\u009f\u200e\u200f\u2028-\u202e\u2066-\u2069]/);
  });

  it('escapes a truncated preview too, and cuts it at 500 characters', () => {
    const asked = terminalQuestion(approval(`{"a":"${'x'.repeat(600)}\u202e"`));
    expect(asked).toContain(`${'x'.repeat(494)}…`);
    expect(asked).not.toContain('\u202e');
  });
});
