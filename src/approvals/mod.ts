export { ANONYMOUS, type Approver, approverOf, covered, isOwn, mayAnswer } from './approvers.js';
export { type Asker, terminalAsker } from './asker.js';
export { ApprovalBook, DEFAULT_SWEEP_MS } from './book.js';
export { approvalGate, awaitDecision, type GateOptions, ServiceStopping } from './gate.js';
export {
  type ApprovalPolicyFile,
  type ApprovalRule,
  DEFAULT_ASK_TIMEOUT_MS,
  decideByPolicy,
  expiryOf,
  globMatches,
  loadPolicy,
} from './policy.js';
export {
  APPROVAL_ID,
  ApprovalStore,
  type ApprovalStoreOptions,
  isLive,
  listed,
  MAX_PENDING_MS,
  type Revisioned,
  SHOWN_ARGUMENTS_CHARS,
} from './store.js';
export {
  type ApprovalLimits,
  type ApprovalsMountOptions,
  approvalsMount,
  eventOf,
  MAX_LIVE_APPROVALS,
  MAX_LIVE_APPROVALS_PER_PRINCIPAL,
  MAX_LIVE_APPROVALS_PER_SESSION,
} from './system-approvals.js';
export * from './types.js';
