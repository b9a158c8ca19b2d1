export { agentsMount, describeMounts, type MountDescription } from './agents.js';
export { packagesMount, type SpecVerdict, validateSpecs } from './packages.js';
export { DEFAULT_SESSIONS_BUCKET, sessionsMount } from './sessions.js';
export { durableTracesMount, tracesMount } from './traces.js';
