/**
 * The approval gate (PROTOCOL 6.1 step 3): asks `system.approvals.$decide` and fails
 * closed. No approver, no answer in time, a malformed answer or a reject all mean no.
 */
import type { BusClient } from '../bus/client.js';
import type { CallContext } from '../bus/context.js';
import {
  MatrixError,
  NoRespondersError,
  TimeoutError,
  UnavailableError,
  UnsendableRequestError,
} from '../bus/errors.js';
import { Mounts } from '../bus/subjects.js';
import { countApproval } from '../telemetry/calls.js';
import type { ApprovalDecision, ApprovalRequest } from './types.js';

/** The op approvers answer. */
export const DECIDE_OP = '$decide';

/** The gate's verdict. */
export type Verdict = { approved: true; by?: string } | { approved: false; reason: string };

/** Asks for a decision and waits at most `timeoutMs` (and never past the caller's deadline). */
export async function approvalGate(
  client: BusClient,
  request: ApprovalRequest,
  ctx: CallContext,
  timeoutMs: number,
): Promise<Verdict> {
  const verdict = await decide(client, request, ctx, timeoutMs);
  countApproval(verdict.approved);
  return verdict;
}

async function decide(
  client: BusClient,
  request: ApprovalRequest,
  ctx: CallContext,
  timeoutMs: number,
): Promise<Verdict> {
  let reply: unknown;
  try {
    reply = await client.request(Mounts.Approvals, DECIDE_OP, request, { ...ctx, timeoutMs });
  } catch (err) {
    return { approved: false, reason: notAsked(err, timeoutMs) };
  }
  const decision = reply as Partial<ApprovalDecision> | undefined;
  if (decision?.decision === 'approve')
    return decision.by === undefined ? { approved: true } : { approved: true, by: decision.by };
  if (decision?.decision === 'reject') {
    const by = typeof decision.by === 'string' ? ` by ${decision.by}` : '';
    const reason = typeof decision.reason === 'string' && decision.reason ? `: ${decision.reason}` : '';
    return { approved: false, reason: `it was rejected${by}${reason}` };
  }
  return { approved: false, reason: 'the approver gave no valid decision' };
}

/** Why no decision came, in words that blame the right party: the request, nobody, the clock, or the approver. */
function notAsked(err: unknown, timeoutMs: number): string {
  if (err instanceof UnsendableRequestError) return `its approval request could not be sent (${err.message})`;
  if (err instanceof NoRespondersError) return 'no approver is running to decide on it';
  if (err instanceof TimeoutError) return `no approver decided within ${timeoutMs} ms`;
  if (err instanceof UnavailableError) return `the approver is unavailable: ${err.message}`;
  return `the approver failed: ${err instanceof MatrixError ? err.message : 'unexpectedly'}`;
}
