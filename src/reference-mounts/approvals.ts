/**
 * `system.approvals`: decides whether a gated call may go ahead. A policy file's rules are
 * tried in order and the first that matches decides: `allow`, `deny`, or `ask` a person at the
 * terminal. With nobody at a terminal, `ask` is a deny: approvals fail closed.
 */
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline/promises';
import type { NatsConnection } from '@nats-io/nats-core';
import { BadRequestError } from '../bus/errors.js';
import { Mount } from '../bus/mount.js';
import { Mounts, subjectMatches } from '../bus/subjects.js';
import { contracts, SchemaId } from '../contracts/schemas.js';
import { DECIDE_OP } from '../dispatcher/approval.js';
import type { ApprovalDecision, ApprovalRequest } from '../dispatcher/types.js';

/** One rule of the policy; absent fields match anything. */
export interface ApprovalRule {
  /** Tool name, or `*`. */
  tool?: string;
  /** NATS subject pattern the target mount must match. */
  target?: string;
  /** Op name, or `*`. */
  op?: string;
  /** Glob on the verified principal (`*` any run of characters, `?` one): `user:ops-*`. A rule with one never matches a call without a principal. */
  principal?: string;
  decision: 'allow' | 'deny' | 'ask';
  reason?: string;
}

/** The policy file's shape (`contracts/approval-policy.json`). */
export interface ApprovalPolicyFile {
  rules?: ApprovalRule[];
  /** When no rule matches; default `ask`. */
  default?: 'allow' | 'deny' | 'ask';
  /** How long a person has to answer, in ms; default 50000 (the dispatcher waits 60000). */
  askTimeoutMs?: number;
}

/** Asks a person. */
export interface Asker {
  ask(request: ApprovalRequest, timeoutMs: number): Promise<ApprovalDecision>;
}

/** Reads and checks a policy file; throws a `BadRequestError` listing every violation. */
export function loadPolicy(path: string): ApprovalPolicyFile {
  let policy: unknown;
  try {
    policy = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new BadRequestError(`cannot read approval policy ${path}: ${(err as Error).message}`);
  }
  const violations = contracts().check(SchemaId.ApprovalPolicy)(policy);
  if (violations !== undefined) {
    throw new BadRequestError(
      `approval policy ${path} is invalid: ${violations.map((v) => `${v.path} ${v.message}`).join('; ')}`,
      {
        details: { violations },
      },
    );
  }
  return policy as ApprovalPolicyFile;
}

/** The rule that decides a request, or the default. */
export function decideByPolicy(
  policy: ApprovalPolicyFile,
  request: ApprovalRequest,
): { decision: ApprovalRule['decision']; reason?: string } {
  const any = (v: string | undefined) => v === undefined || v === '*';
  for (const rule of policy.rules ?? []) {
    if (!any(rule.tool) && rule.tool !== request.tool) continue;
    if (rule.target !== undefined && !subjectMatches(rule.target, request.target)) continue;
    if (!any(rule.op) && rule.op !== request.op) continue;
    if (rule.principal !== undefined && !globMatches(rule.principal, request.principal)) continue;
    return rule.reason === undefined ? { decision: rule.decision } : { decision: rule.decision, reason: rule.reason };
  }
  return { decision: policy.default ?? 'ask' };
}

const globs = new Map<string, RegExp>();

/** Does a glob (`*` any run of characters, `?` one, all else literal) match the whole value? */
export function globMatches(glob: string, value: string | undefined): boolean {
  if (value === undefined) return false;
  let pattern = globs.get(glob);
  if (pattern === undefined) {
    const source = [...glob]
      .map((ch) => (ch === '*' ? '.*' : ch === '?' ? '.' : ch.replace(/[\\^$.|+()[\]{}]/g, '\\$&')))
      .join('');
    pattern = new RegExp(`^${source}$`, 's');
    globs.set(glob, pattern);
  }
  return pattern.test(value);
}

/** Asks at the terminal, one question at a time; undefined when stdin is not a terminal. */
export function terminalAsker(): Asker | undefined {
  if (!process.stdin.isTTY) return undefined;
  let queue: Promise<unknown> = Promise.resolve();
  return {
    ask: (request, timeoutMs) => {
      const answer = queue.then(async (): Promise<ApprovalDecision> => {
        const rl = createInterface({ input: process.stdin, output: process.stderr });
        try {
          const args = JSON.stringify(request.arguments);
          const question = `\napprove ${request.tool} → ${request.target}.${request.op} ${args.length > 500 ? `${args.slice(0, 500)}…` : args}${request.principal ? ` for ${request.principal}` : ''}? [y/N] `;
          const reply = await rl.question(question, { signal: AbortSignal.timeout(timeoutMs) });
          return /^y(es)?$/i.test(reply.trim())
            ? { decision: 'approve', by: 'terminal' }
            : { decision: 'reject', by: 'terminal', reason: 'the person at the terminal said no' };
        } catch {
          return { decision: 'reject', by: 'terminal', reason: `no answer at the terminal within ${timeoutMs} ms` };
        } finally {
          rl.close();
        }
      });
      queue = answer;
      return answer;
    },
  };
}

/** Builds the `system.approvals` mount. */
export function approvalsMount(
  nc: NatsConnection,
  options: { policy?: ApprovalPolicyFile; asker?: Asker } = {},
): Mount {
  const policy = options.policy ?? { default: 'ask' };
  return new Mount(nc, {
    name: Mounts.Approvals,
    version: '0.1.0',
    description: 'Approves or rejects gated tool calls by policy, asking a person where the policy says ask.',
    ops: {
      [DECIDE_OP]: {
        description: 'Decides whether a gated call may go ahead.',
        request: SchemaId.ApprovalRequest,
        response: SchemaId.ApprovalReply,
        handle: async (request: ApprovalRequest): Promise<ApprovalDecision> => {
          const { decision, reason } = decideByPolicy(policy, request);
          if (decision === 'allow') return { decision: 'approve', by: 'policy', ...(reason ? { reason } : {}) };
          if (decision === 'deny')
            return { decision: 'reject', by: 'policy', reason: reason ?? 'the approval policy denies it' };
          if (options.asker === undefined)
            return {
              decision: 'reject',
              by: 'policy',
              reason: 'the policy says ask, and there is no one at a terminal to ask',
            };
          return options.asker.ask(request, policy.askTimeoutMs ?? 50_000);
        },
      },
    },
  });
}
