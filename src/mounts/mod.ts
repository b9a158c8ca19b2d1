export { agentsMount, describeMounts, type MountDescription } from './agents.js';
export { approvalsMount, decideByPolicy, loadPolicy, terminalAsker, type ApprovalPolicyFile, type ApprovalRule, type Asker } from './approvals.js';
export { packagesMount, validateSpecs, type SpecVerdict } from './packages.js';
export { DEFAULT_SESSIONS_BUCKET, sessionsMount } from './sessions.js';
export { TraceBuffer, tracesMount, type TraceQuery } from './traces.js';
