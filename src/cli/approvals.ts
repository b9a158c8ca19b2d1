/**
 * `approvals`, `approve`, `reject`: a person answers pending approvals from a shell (PROTOCOL 8).
 * Each sends `--grant` (an approver's grant, `MATRIX_GRANT`) as `Matrix-Grant` where the
 * service trusts issuers.
 */
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
import { subscribeEvents } from '../bus/events.js';
import { Mounts } from '../bus/subjects.js';
import { withConnection } from './config.js';
import { ExitCode, json, type Output, table, UsageError } from './output.js';
import { interrupted, verbAction } from './run.js';
import { grantContext } from './session-flags.js';

const TIMEOUT_MS = 10_000;
/** Characters of the arguments a table row shows. */
const ARGS_SHOWN = 60;

/** What `approvals` takes; `until` ends `--watch` (default: Ctrl-C or SIGTERM). */
export interface ApprovalsArgs {
  grant?: string;
  json?: boolean;
  watch?: boolean;
  until?: Promise<unknown>;
}

/** `approvals`: the pending approvals the grant may answer, oldest first (every page); `--watch` then follows events. */
export async function approvals(client: BusClient, args: ApprovalsArgs, out: Output): Promise<number> {
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
  if (args.json && !args.watch) out.print(json({ approvals: listed }));
  else if (args.json) for (const approval of listed) out.print(JSON.stringify({ kind: 'listed', approval }));
  else {
    out.print(table(['ID', 'TOOL', 'TARGET', 'PRINCIPAL', 'SESSION', 'LEFT', 'ARGUMENTS'], listed.map(row)));
    out.print(`(${listed.length} pending; answer with: matrix-tools approve <id> | reject <id> --reason …)`);
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

/** What `approve` and `reject` take. */
export interface AnswerArgs {
  id: string;
  reason?: string;
  grant?: string;
  json?: boolean;
}

/** `approve <id>`: the waiting call goes ahead, once. */
export function approve(client: BusClient, args: AnswerArgs, out: Output): Promise<number> {
  return answer(client, 'approve', args, out);
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

/** Declares `approvals`, `approve` and `reject`, each with the connection flags and `--grant`. */
export function addApprovalCommands(program: Command): void {
  const grant = () =>
    new Option(
      '--grant <jwt|file>',
      "an approver's grant (nats.approve), sent as Matrix-Grant (env: MATRIX_GRANT)",
    ).env('MATRIX_GRANT');
  withConnection(program.command('approvals').description('list the pending approvals you may answer'))
    .addOption(grant())
    .option('--watch', 'then print each approval asked and answered, until Ctrl-C')
    .option('--json', 'print JSON (with --watch: one object per line)')
    .action(verbAction(approvals));
  withConnection(program.command('approve').description('approve a pending approval: its call runs, once'))
    .argument('<id>', 'the approval id (matrix-tools approvals)')
    .option('--reason <text>', 'why (kept with the decision)')
    .addOption(grant())
    .option('--json', 'print the answer as JSON')
    .action(verbAction(approve, 'id'));
  withConnection(program.command('reject').description('reject a pending approval: its call is not made'))
    .argument('<id>', 'the approval id (matrix-tools approvals)')
    .requiredOption('--reason <text>', 'why: the model reads it')
    .addOption(grant())
    .option('--json', 'print the answer as JSON')
    .action(verbAction(reject, 'id'));
}
