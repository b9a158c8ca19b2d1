import { describe, expect, it } from 'vitest';
import { CallFailure, errorResult, MAX_ERROR_MESSAGE_CHARS } from '../../src/dispatcher/results.js';

describe('an error result', () => {
  it("carries at most 4 KiB of a target's own message, saying how much was cut", () => {
    // A target's error message is its to write: uncut, a tiny task finished as a 1 MB record, twice over.
    const result = errorResult('c-1', 'err_run', new CallFailure('internal', `boom ${'x'.repeat(1_000_000)}`));
    expect(result.content.length).toBeLessThan(MAX_ERROR_MESSAGE_CHARS + 64);
    expect(result.error?.message).toBe(result.content);
    expect(result.content).toMatch(/… \(995909 more characters cut\)$/);
    expect(result.content.startsWith('boom xxx')).toBe(true);
  });

  it('keeps a message within the bound as it is', () => {
    const result = errorResult('c-2', 't', new CallFailure('not_found', 'no such tool'));
    expect(result).toMatchObject({
      isError: true,
      content: 'no such tool',
      error: { code: 'not_found', message: 'no such tool' },
    });
  });
});
