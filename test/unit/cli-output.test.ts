import { afterEach, describe, expect, it, vi } from 'vitest';
import { processOutput } from '../../src/cli/output.js';
import { printable } from '../../src/printable.js';

describe('what the CLI prints to a terminal', () => {
  afterEach(() => vi.restoreAllMocks());

  it('shows control characters as escapes, so a tool name from the bus cannot erase or forge lines', () => {
    const forged = 'x\r\u001b[2K2026-11-30T00:00:00Z call y_secret ok\u001b]0;owned\u0007\u009b';
    expect(printable(forged)).toBe(
      'x\\u000d\\u001b[2K2026-11-30T00:00:00Z call y_secret ok\\u001b]0;owned\\u0007\\u009b',
    );
    expect(printable('two\nlines\tand ünïcødé ✓')).toBe('two\nlines\tand ünïcødé ✓');
  });

  it('escapes them in everything it writes to stdout and stderr', () => {
    const written: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => written.push(String(chunk)) > 0);
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => written.push(String(chunk)) > 0);
    processOutput.print('a\u001b[31mred');
    processOutput.note('b\rc');
    expect(written).toEqual(['a\\u001b[31mred\n', 'b\\u000dc\n']);
  });
});

describe('characters that reorder or end what a terminal shows', () => {
  it('shows bidi marks, embeddings, overrides, isolates and line separators as escapes', () => {
    const reordered =
      'report\u202efdp.exe \u200e\u200f \u202a\u202b\u202c\u202d \u2066\u2067\u2068\u2069 a\u2028b\u2029c';
    expect(printable(reordered)).toBe(
      'report\\u202efdp.exe \\u200e\\u200f \\u202a\\u202b\\u202c\\u202d \\u2066\\u2067\\u2068\\u2069 a\\u2028b\\u2029c',
    );
    expect(printable('\u0080\u0085\u009b2J\u009d')).toBe('\\u0080\\u0085\\u009b2J\\u009d');
  });

  it('leaves the joiners that writing systems and emoji need', () => {
    const joined = 'क्\u200dष \u200c 👩\u200d💻';
    expect(printable(joined)).toBe(joined);
  });
});
