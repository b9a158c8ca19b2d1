/**
 * `approvals`, `approvals <id>`, `approve`, `reject`: a person answers pending approvals from a
 * shell (PROTOCOL 8). Each sends `--grant` (an approver's grant, `MATRIX_GRANT`) as
 * `Matrix-Grant` where the service trusts issuers. `approve` shows the whole approval first and
 * asks at a terminal; without one it needs `--yes`.
 */
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline/promises';
import { type Command, Option } from 'commander';
import {
  type AnswerReply,
  type ApprovalEvent,
  ApprovalOp,
  DECIDED_EVENTS,
  PENDING_EVENTS,
  type PendingApproval,
  type PendingReply,
} from '../approvals/types.js';
import type { BusClient } from '../bus/client.js';
import { NotFoundError } from '../bus/errors.js';
import { subscribeEvents } from '../bus/events.js';
import { Mounts } from '../bus/subjects.js';
import { printable } from '../printable.js';
import { withConnection } from './config.js';
import { ExitCode, json, type Output, table, UsageError } from './output.js';
import { interrupted, verbAction } from './run.js';
import { grantContext } from './session-flags.js';

const TIMEOUT_MS = 10_000;
/** Characters of the arguments a table row shows. */
const ARGS_SHOWN = 60;

/**
 * What `approvals` takes; `id` shows that one approval in full; `until` ends `--watch` (default:
 * Ctrl-C or SIGTERM).
 */
export interface ApprovalsArgs {
  id?: string;
  grant?: string;
  json?: boolean;
  watch?: boolean;
  until?: Promise<unknown>;
}

/**
 * `approvals`: the pending approvals the grant may answer, oldest first (every page); `--watch`
 * then follows events.
 */
export async function approvals(client: BusClient, args: ApprovalsArgs, out: Output): Promise<number> {
  if (args.id !== undefined) {
    const one = await findPending(client, args.id, args);
    out.print(args.json ? json(one) : detail(one));
    return ExitCode.Ok;
  }
  const listed = await listPending(client, args);
  if (args.json && !args.watch) out.print(json({ approvals: listed }));
  else if (args.json) for (const approval of listed) out.print(JSON.stringify({ kind: 'listed', approval }));
  else {
    out.print(table(['ID', 'TOOL', 'TARGET', 'PRINCIPAL', 'SESSION', 'LEFT', 'ARGUMENTS'], listed.map(row)));
    out.print(
      `(${listed.length} pending; see one in full: matrix-tools approvals <id>; answer: approve <id> | reject <id> --reason …)`,
    );
  }
  if (!args.watch) return ExitCode.Ok;
  const print = (kind: string, event: ApprovalEvent) =>
    out.print(args.json ? JSON.stringify({ kind, event }) : `${new Date().toISOString()} ${describe(kind, event)}`);
  const stops = [
    subscribeEvents<ApprovalEvent>(client.nc, PENDING_EVENTS, (e) => print('pending', e)),
    subscribeEvents<ApprovalEvent>(client.nc, DECIDED_EVENTS, (e) => print('decided', e)),
  ];
  await client.nc.flush();
  out.note('watching approvals; Ctrl-C to stop');
  await (args.until ?? interrupted());
  for (const stop of stops) stop();
  return ExitCode.Ok;
}

/** Every pending approval the grant may answer, oldest first (every page of `$pending`). */
async function listPending(client: BusClient, args: { grant?: string }): Promise<PendingApproval[]> {
  const ctx = { timeoutMs: TIMEOUT_MS, ...grantContext(args) };
  const listed: PendingApproval[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.request<PendingReply>(
      Mounts.Approvals,
      ApprovalOp.Pending,
      { limit: 200, ...(cursor ? { cursor } : {}) },
      ctx,
    );
    listed.push(...page.approvals);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return listed;
}

/**
 * The pending approval `id` as the grant may see it: `not_found` when it is unknown, expired or
 * not the grant's to answer; `conflict` (who answered, when) once it was answered.
 */
async function findPending(client: BusClient, id: string, args: { grant?: string }): Promise<PendingApproval> {
  const reply = await client.request<PendingReply>(
    Mounts.Approvals,
    ApprovalOp.Pending,
    { approvalId: id },
    { timeoutMs: TIMEOUT_MS, ...grantContext(args) },
  );
  const found = reply.approvals.find((a) => a.approvalId === id);
  if (found === undefined) throw new NotFoundError(`no pending approval ${id} that this grant may answer`);
  return found;
}

/**
 * One approval in full, as a person decides on it: the call, who asks, the whole arguments as
 * indented JSON (or the preview, said to be cut), their digest and length. Escaped as the CLI
 * prints everything, so what the agent wrote cannot forge or reorder the lines.
 */
export function detail(a: PendingApproval): string {
  const args = typeof a.arguments === 'string' ? a.arguments : JSON.stringify(a.arguments, null, 2);
  const lines = [
    `approval   ${a.approvalId}`,
    `call       ${a.tool} → ${a.target} ${a.op} (call id ${a.callId})`,
    `asked by   ${a.principal ?? '-'} in session ${a.session ?? '-'} at ${a.requestedAt}`,
    `expires    ${a.expiresAt} (${left(a.expiresAt)} left)`,
    `digest     sha256:${a.argumentsDigest} of ${a.argumentsBytes} characters of JSON`,
    a.truncated
      ? `arguments  TRUNCATED: the first ${args.length} of ${a.argumentsBytes} characters; if what you cannot see matters, reject`
      : 'arguments',
    args,
  ];
  return printable(lines.join('\n'));
}

/** What `approve` and `reject` take. */
export interface AnswerArgs {
  id: string;
  reason?: string;
  grant?: string;
  json?: boolean;
  /** Approve without asking (needed where stdin is not a terminal). */
  yes?: boolean;
  /** Asks the person a yes/no question; default: at the terminal when stdin is one, else none. */
  confirm?: (question: string) => Promise<boolean>;
}

/**
 * `approve <id>`: shows the approval in full (stderr), asks for a yes unless `--yes`, then the
 * waiting call goes ahead, once. Without a terminal to ask and without `--yes` it refuses
 * (a usage error): a script says `--yes`, so nobody approves unseen by accident.
 */
export async function approve(client: BusClient, args: AnswerArgs, out: Output): Promise<number> {
  const shown = await findPending(client, args.id, args);
  out.note(detail(shown));
  if (!args.yes) {
    const confirm = args.confirm ?? terminalConfirm();
    if (confirm === undefined)
      throw new UsageError('approve asks before it approves: pass --yes where stdin is not a terminal');
    if (!(await confirm(`approve ${shown.approvalId}? [y/N] `))) {
      out.note('not approved');
      return ExitCode.Failed;
    }
  }
  return answer(client, 'approve', args, out);
}

/** A yes/no question at the terminal (stderr), or undefined when stdin is not a terminal. */
function terminalConfirm(): ((question: string) => Promise<boolean>) | undefined {
  if (!process.stdin.isTTY) return undefined;
  return async (question) => {
    const rl = createInterface({ input: process.stdin, output: process.stderr });
    try {
      return /^y(es)?$/i.test((await rl.question(question)).trim());
    } finally {
      rl.close();
    }
  };
}

/** `reject <id> --reason …`: the call is not made; the model reads the reason. */
export function reject(client: BusClient, args: AnswerArgs, out: Output): Promise<number> {
  if (!args.reason?.trim()) throw new UsageError('reject needs --reason: the model reads it');
  return answer(client, 'reject', args, out);
}

async function answer(
  client: BusClient,
  decision: 'approve' | 'reject',
  args: AnswerArgs,
  out: Output,
): Promise<number> {
  const body = { approvalId: args.id, decision, ...(args.reason ? { reason: args.reason } : {}) };
  const reply = await client.request<AnswerReply>(Mounts.Approvals, ApprovalOp.Answer, body, {
    timeoutMs: TIMEOUT_MS,
    ...grantContext(args),
  });
  if (args.json) out.print(json(reply));
  else
    out.print(
      `${decision === 'approve' ? 'approved' : 'rejected'} ${reply.approvalId} as ${reply.by} at ${reply.decidedAt}`,
    );
  return ExitCode.Ok;
}

function row(a: PendingApproval): string[] {
  const args = typeof a.arguments === 'string' ? a.arguments : JSON.stringify(a.arguments);
  const shown = args.length > ARGS_SHOWN || a.truncated ? `${args.slice(0, ARGS_SHOWN - 1)}…` : args;
  return [a.approvalId, a.tool, `${a.target} ${a.op}`, a.principal ?? '-', a.session ?? '-', left(a.expiresAt), shown];
}

/** Time left until `expiresAt`: `59m 12s`, `40s`, `expired`. */
export function left(expiresAt: string, now = Date.now()): string {
  const s = Math.floor((Date.parse(expiresAt) - now) / 1000);
  if (!(s > 0)) return 'expired';
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h > 0 ? `${h}h ${m}m` : m > 0 ? `${m}m ${s % 60}s` : `${s}s`;
}

function describe(kind: string, e: ApprovalEvent): string {
  const call = `${e.tool} → ${e.target} ${e.op}${e.principal ? ` for ${e.principal}` : ''}`;
  if (kind === 'pending') return `pending ${e.approvalId} ${call} (until ${e.expiresAt})`;
  if (e.expired) return `expired ${e.approvalId} ${call}`;
  const reason = e.reason ? `: ${e.reason}` : '';
  return `${e.decision === 'approve' ? 'approved' : 'rejected'} ${e.approvalId} ${call} by ${e.by ?? '?'}${reason}`;
}

/**
 * The action of an approver's verb: `--token-file` (an access token of the identity provider the
 * service trusts, PROTOCOL 14) is sent as the grant, as `--grant` would be; both is a usage error.
 */
function approverAction(verb: Parameters<typeof verbAction>[0], ...positional: string[]) {
  const action = verbAction(verb, ...positional);
  return (...params: unknown[]) => {
    const cmd = params[params.length - 1] as Command;
    const { tokenFile, grant } = cmd.opts<{ tokenFile?: string; grant?: string }>();
    if (tokenFile !== undefined) {
      if (grant !== undefined && cmd.getOptionValueSource('grant') === 'cli')
        throw new UsageError('give --grant or --token-file, not both');
      let token: string;
      try {
        token = readFileSync(tokenFile, 'utf8').trim();
      } catch (err) {
        throw new UsageError(`cannot read --token-file ${tokenFile}: ${(err as Error).message}`);
      }
      cmd.setOptionValue('grant', token);
    }
    return action(...params);
  };
}

/** Declares `approvals`, `approve` and `reject`, each with the connection flags, `--grant` and `--token-file`. */
export function addApprovalCommands(program: Command): void {
  const grant = () =>
    new Option(
      '--grant <jwt|file>',
      "an approver's grant (nats.approve), sent as Matrix-Grant (env: MATRIX_GRANT)",
    ).env('MATRIX_GRANT');
  const tokenFile = () =>
    new Option(
      '--token-file <file>',
      "an access token of the identity provider the service trusts (--trust-oidc), sent as Matrix-Grant: you approve as the IdP's principal (env: MATRIX_TOKEN_FILE)",
    ).env('MATRIX_TOKEN_FILE');
  withConnection(
    program
      .command('approvals')
      .description('list the pending approvals you may answer; with an id, show that one in full'),
  )
    .argument('[id]', 'one approval id: its whole arguments, digest and whether they were cut')
    .addOption(grant())
    .addOption(tokenFile())
    .option('--watch', 'then print each approval asked and answered, until Ctrl-C')
    .option('--json', 'print JSON (with --watch: one object per line)')
    .action(approverAction(approvals, 'id'));
  withConnection(
    program
      .command('approve')
      .description('approve a pending approval: shows it in full, asks, then its call runs, once'),
  )
    .argument('<id>', 'the approval id (matrix-tools approvals)')
    .option('--reason <text>', 'why (kept with the decision)')
    .option('--yes', 'do not ask (needed where stdin is not a terminal)')
    .addOption(grant())
    .addOption(tokenFile())
    .option('--json', 'print the answer as JSON')
    .action(approverAction(approve, 'id'));
  withConnection(program.command('reject').description('reject a pending approval: its call is not made'))
    .argument('<id>', 'the approval id (matrix-tools approvals)')
    .requiredOption('--reason <text>', 'why: the model reads it')
    .addOption(grant())
    .addOption(tokenFile())
    .option('--json', 'print the answer as JSON')
    .action(approverAction(reject, 'id'));
}
