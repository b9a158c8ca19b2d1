/**
 * The terminal asker, for development (`serve` in a terminal with `ask`): one more way to
 * answer a pending approval, beside the console, the CLI and `$answer`. Whichever answers first
 * wins; when another does, the question at the terminal is withdrawn.
 */
import { createInterface } from 'node:readline/promises';
import { printable } from '../printable.js';
import type { Answer, PendingApproval } from './types.js';

/** Asks a person about one pending approval; undefined when they gave no answer before `signal` aborted. */
export interface Asker {
  ask(approval: PendingApproval, signal: AbortSignal): Promise<{ decision: Answer; reason?: string } | undefined>;
}

/** Asks at the terminal, one question at a time; undefined when stdin is not a terminal. */
export function terminalAsker(): Asker | undefined {
  if (!process.stdin.isTTY) return undefined;
  let queue: Promise<unknown> = Promise.resolve();
  return {
    ask: (approval, signal) => {
      const answer = queue.then(async () => {
        if (signal.aborted) return undefined;
        const rl = createInterface({ input: process.stdin, output: process.stderr });
        try {
          const reply = await rl.question(terminalQuestion(approval), { signal });
          return /^y(es)?$/i.test(reply.trim())
            ? { decision: 'approve' as const }
            : { decision: 'reject' as const, reason: 'the person at the terminal said no' };
        } catch {
          return undefined;
        } finally {
          rl.close();
        }
      });
      queue = answer;
      return answer;
    },
  };
}

/**
 * The question the terminal asks about one approval, its arguments cut at 500 characters. Every
 * part but the frame comes from the calling agent, so it is escaped as the CLI escapes what it
 * prints: no control, bidi or separator character reaches the operator's terminal raw.
 */
export function terminalQuestion(approval: PendingApproval): string {
  const args = typeof approval.arguments === 'string' ? approval.arguments : JSON.stringify(approval.arguments);
  const shown = args.length > 500 ? `${args.slice(0, 500)}…` : args;
  const who = approval.principal ? ` for ${approval.principal}` : '';
  return `\n${printable(`approve ${approval.tool} → ${approval.target}.${approval.op} ${shown}${who} (${approval.approvalId}, until ${approval.expiresAt})? [y/N] `)}`;
}
