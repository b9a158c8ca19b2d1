/** What a CLI verb wrote, kept in memory so a test can read it. */
import type { Output } from '../../src/cli/output.js';

/** An `Output` that keeps every line: `printed` went to stdout, `notes` to stderr. */
export interface MemoryOutput extends Output {
  printed: string[];
  notes: string[];
  /** Everything printed, one string. */
  readonly stdout: string;
  /** Every note, one string. */
  readonly stderr: string;
}

/** A fresh `MemoryOutput`. */
export function memoryOutput(): MemoryOutput {
  const printed: string[] = [];
  const notes: string[] = [];
  return {
    printed,
    notes,
    print: (text) => void printed.push(text),
    note: (text) => void notes.push(text),
    get stdout() {
      return printed.join('\n');
    },
    get stderr() {
      return notes.join('\n');
    },
  };
}
