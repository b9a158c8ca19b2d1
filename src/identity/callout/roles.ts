/**
 * The NATS user each role of the claims mapping becomes under auth callout (PROTOCOL 14): the
 * account it is placed in and its subject permissions, the least privilege `deploy/nats.conf`
 * gives that kind of user, with an inbox of its own where replies come back to it alone.
 */
import { createHash } from 'node:crypto';
import type { Permissions } from '@nats-io/jwt';
import type { NatsRole } from '../oidc/mapping.js';

/** The accounts of `deploy/nats-auth-callout.conf` a role's user is placed in. */
export interface CalloutAccounts {
  /** The agents' account, which imports only what agents may call (default `AGENTS`). */
  agents: string;
  /** The service's account: approvers, operators and hosts (default `MATRIX`). */
  service: string;
}

/** The accounts of the shipped configuration. */
export const DEFAULT_ACCOUNTS: CalloutAccounts = { agents: 'AGENTS', service: 'MATRIX' };

/** What an agent may publish: the dispatcher, the registry's read ops and its own tasks (deploy/nats.conf's `agent`). */
export const AGENT_OPS = [
  'system.dispatcher.$call',
  'system.dispatcher.$cancel',
  'system.tools.$resolve',
  'system.tools.$search',
  'system.tools.$list',
  'system.tools.$introspect',
  'system.tasks.$get',
  'system.tasks.$result',
  'system.tasks.$cancel',
  'system.tasks.$list',
] as const;

/** What an approver may publish: the approvals it may list and answer (PROTOCOL 8). */
export const APPROVER_OPS = ['system.approvals.$pending', 'system.approvals.$answer'] as const;

/** The inbox prefix operators share: mounts may answer onto it only (deploy/nats.conf). */
export const OPERATOR_INBOX = '_INBOX_operator';

/** A NATS user for one role: where it goes and what it may do. */
export interface RoleUser {
  /** The account it is placed in. */
  account: string;
  /** The inbox prefix its replies come on (`NATS_INBOX_PREFIX` / `--inbox-prefix` of its client). */
  inboxPrefix: string;
  /** Its publish and subscribe permissions. */
  permissions: Required<Pick<Permissions, 'pub' | 'sub'>>;
}

/** The inbox prefix every callout user's inbox starts with: no static user's, nor a reserved one. */
export const CALLOUT_INBOX_PREFIX = '_INBOX_oidc-';

/**
 * The inbox prefix of `principal`: `_INBOX_oidc-<principal>` when the principal is one subject
 * token (no `.`, `*`, `>`, whitespace or control character, at most 128 characters) and not 32
 * lowercase hex digits, else `_INBOX_oidc-<first 32 hex digits of its SHA-256>`; so no two
 * principals share one. Always under `_INBOX_oidc-`: a principal named `targets`, `operator` or
 * `agent` gets `_INBOX_oidc-targets`, never `_INBOX_targets`, where mounts answer the service,
 * nor the inbox of a static user of deploy/nats.conf (none is named `oidc-…`).
 */
export function inboxPrefixOf(principal: string): string {
  if (/^[^\s.*>\p{Cc}]{1,128}$/u.test(principal) && !/^[0-9a-f]{32}$/.test(principal))
    return `${CALLOUT_INBOX_PREFIX}${principal}`;
  return `${CALLOUT_INBOX_PREFIX}${createHash('sha256').update(principal).digest('hex').slice(0, 32)}`;
}

/** The NATS user a token of `role`, held by `principal`, becomes. */
export function roleUser(role: NatsRole, principal: string, accounts: CalloutAccounts = DEFAULT_ACCOUNTS): RoleUser {
  const inbox = inboxPrefixOf(principal);
  switch (role) {
    case 'agent':
      return {
        account: accounts.agents,
        inboxPrefix: inbox,
        permissions: {
          pub: { allow: [...AGENT_OPS], deny: [] },
          sub: { allow: [`${inbox}.>`, 'system.tools.events.changed'], deny: [] },
        },
      };
    case 'approver':
      return {
        account: accounts.service,
        inboxPrefix: inbox,
        permissions: {
          pub: { allow: [...APPROVER_OPS], deny: [] },
          sub: { allow: [`${inbox}.>`, 'system.approvals.events.>'], deny: [] },
        },
      };
    case 'operator':
      return {
        account: accounts.service,
        inboxPrefix: OPERATOR_INBOX,
        permissions: {
          pub: { allow: ['system.>', '$SRV.>'], deny: ['system.*.events.>', 'system.dispatcher.audit.>'] },
          sub: { allow: [`${OPERATOR_INBOX}.>`, 'system.*.events.>'], deny: [] },
        },
      };
    case 'host':
      // A mount's user (deploy/nats.conf's `weather`) for every MCP server's mount: it takes
      // requests to mcp.<name>.<op> only and answers onto the two inboxes mounts answer onto.
      return {
        account: accounts.service,
        inboxPrefix: inbox,
        permissions: {
          pub: { allow: ['_INBOX_targets.>', `${OPERATOR_INBOX}.>`], deny: [] },
          sub: { allow: ['mcp.*.*'], deny: ['mcp.*.*.>'] },
        },
      };
  }
}
