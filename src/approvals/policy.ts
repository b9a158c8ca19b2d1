/**
 * The approval policy: a file's rules are tried in order and the first that matches decides:
 * `allow`, `deny`, or `ask` a person (a pending approval, answered where people work).
 */
import { readFileSync } from 'node:fs';
import { contracts, SchemaId } from '../bus/contracts.js';
import { BadRequestError } from '../bus/errors.js';
import { subjectMatches } from '../bus/subjects.js';
import { principalKey } from '../identity/principal.js';
import { MAX_PENDING_MS } from './store.js';
import type { ApprovalRequest } from './types.js';

/** One rule of the policy; absent fields match anything. */
export interface ApprovalRule {
  /** Tool name, or `*`. */
  tool?: string;
  /** NATS subject pattern the target mount must match. */
  target?: string;
  /** Op name, or `*`. */
  op?: string;
  /**
   * Glob on the verified principal (`*` any run of characters, `?` one): `user:ops-*`. A rule with
   * one never matches a call without a principal.
   */
  principal?: string;
  decision: 'allow' | 'deny' | 'ask';
  reason?: string;
}

/** The policy file's shape (`contracts/approval-policy.json`). */
export interface ApprovalPolicyFile {
  rules?: ApprovalRule[];
  /** When no rule matches; default `ask`. */
  default?: 'allow' | 'deny' | 'ask';
  /**
   * The longest an approval may stay pending, in ms: default 3600000 (1 h), at most 86400000
   * (24 h), and never past the caller's deadline.
   */
  askTimeoutMs?: number;
  /** Most approvals of one principal live at once (pending, or approved and unused); default 100, 1..10000. */
  maxPendingPerPrincipal?: number;
  /** Most approvals of one session live at once; default 50, 1..10000. */
  maxPendingPerSession?: number;
}

/**
 * The ready line's word on approvals: the policy file `path` (its rules and default), or the
 * default policy when there is none.
 */
export function describePolicy(path: string | undefined, policy: ApprovalPolicyFile | undefined): string {
  if (path === undefined || policy === undefined)
    return 'approvals: default policy (ask a person for every gated call)';
  const rules = policy.rules?.length ?? 0;
  return `approvals: policy ${path} (${rules} rule${rules === 1 ? '' : 's'}, default ${policy.default ?? 'ask'})`;
}

/** How long an approval stays pending when the policy does not say: 1 h. */
export const DEFAULT_ASK_TIMEOUT_MS = 3_600_000;

/**
 * When a pending approval asked at `now` expires (Unix ms): the policy's bound, the 24 h bound, the
 * caller's deadline.
 */
export function expiryOf(policy: ApprovalPolicyFile, deadline: number | undefined, now = Date.now()): number {
  const own = now + Math.min(policy.askTimeoutMs ?? DEFAULT_ASK_TIMEOUT_MS, MAX_PENDING_MS);
  return deadline === undefined ? own : Math.min(own, deadline);
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
    if (rule.principal !== undefined && !principalMatches(rule.principal, request.principal)) continue;
    return rule.reason === undefined ? { decision: rule.decision } : { decision: rule.decision, reason: rule.reason };
  }
  return { decision: policy.default ?? 'ask' };
}

/**
 * Does a glob match a principal, both compared as a reader sees them (`principalKey`: case,
 * white space, compatibility forms and lookalike letters folded)?
 */
export function principalMatches(glob: string, principal: string | undefined): boolean {
  return principal !== undefined && globMatches(principalKey(glob), principalKey(principal));
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
