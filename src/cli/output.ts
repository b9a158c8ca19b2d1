/** What the CLI prints, and the exit codes scripts can rely on. */
import { MatrixError } from '../bus/errors.js';

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

/** A usage error: printed as is, exit 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** Prints an error in one or a few lines and returns its exit code. */
export function reportError(err: unknown): number {
  if (err instanceof UsageError) {
    process.stderr.write(`error: ${err.message}\n`);
    return ExitCode.Usage;
  }
  if (err instanceof MatrixError) {
    process.stderr.write(`error (${err.code}): ${err.message}\n`);
    for (const v of err.details?.violations ?? []) process.stderr.write(`  ${v.path || '(body)'}: ${v.message}\n`);
    return err.code === 'unavailable' || err.code === 'timeout' ? ExitCode.Unreachable : ExitCode.Failed;
  }
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`error: ${message}\n`);
  return /ECONNREFUSED|connection refused|CONNECTION_REFUSED|getaddrinfo/i.test(message) ? ExitCode.Unreachable : ExitCode.Failed;
}

/** Parses a JSON flag value or fails with a usage error naming the flag. */
export function jsonFlag(flag: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${flag} is not valid JSON: ${(err as Error).message}`);
  }
}
