/** What the CLI prints, where, and the exit codes scripts can rely on. */
import { MatrixError } from '../bus/errors.js';
import { printable } from '../printable.js';

/** Exit codes of every verb. */
export const ExitCode = {
  /** Done. */
  Ok: 0,
  /** The op failed (an error reply), or the tool call returned `isError`. */
  Failed: 1,
  /** Wrong usage: unknown flag, unreadable `--args` or file. */
  Usage: 2,
  /** NATS or the mount could not be reached in time (unavailable, timeout). */
  Unreachable: 3,
} as const;

/** Where a verb writes: its result, and notes for the person at the terminal. */
export interface Output {
  /** One line (or block) of the verb's result: stdout. */
  print(text: string): void;
  /** Progress, trace ids, errors: stderr, so stdout stays parseable. */
  note(text: string): void;
}

/**
 * Characters a terminal acts on or that reorder what it shows: C0 but tab and newline, DEL, C1
 * (U+0080–009F: 8-bit CSI and OSC), the bidirectional marks, embeddings, overrides and
 * isolates (U+200E/F, U+202A–E, U+2066–9: `report\u202efdp.exe` would read `reportexe.pdf`),
 * and the line and paragraph separators (U+2028/9).
 */
/** The process's stdout and stderr, control characters escaped. */
export const processOutput: Output = {
  print: (text) => void process.stdout.write(`${printable(text)}\n`),
  note: (text) => void process.stderr.write(`${printable(text)}\n`),
};

/** A fixed-width table with a header row. */
export function table(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (c ?? '').padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/** Pretty JSON, as `--json` prints it. */
export const json = (value: unknown): string => JSON.stringify(value, null, 2);

/** A usage error: printed as is, exit 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** Prints an error in one or a few lines and returns its exit code. */
export function reportError(err: unknown, out: Output = processOutput): number {
  if (err instanceof UsageError) {
    out.note(`error: ${err.message}`);
    return ExitCode.Usage;
  }
  if (err instanceof MatrixError) {
    out.note(`error (${err.code}): ${err.message}`);
    for (const v of err.details?.violations ?? []) out.note(`  ${v.path || '(body)'}: ${v.message}`);
    return err.code === 'unavailable' || err.code === 'timeout' ? ExitCode.Unreachable : ExitCode.Failed;
  }
  const message = err instanceof Error ? err.message : String(err);
  out.note(`error: ${message}`);
  return /ECONNREFUSED|connection refused|CONNECTION_REFUSED|getaddrinfo/i.test(message)
    ? ExitCode.Unreachable
    : ExitCode.Failed;
}

/** Parses a JSON flag value or fails with a usage error naming the flag. */
export function jsonFlag(flag: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${flag} is not valid JSON: ${(err as Error).message}`);
  }
}
