export { type CallOptions, type CallProgress, runCall } from './call.js';
export * from './tool-calls.js';
export {
  type ChangeListener,
  openToolSession,
  type SessionRequest,
  ToolSession,
  type ToolSessionOptions,
} from './tool-session.js';
