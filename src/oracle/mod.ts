export { type CallOptions, type CallProgress, runCall } from './call.js';
export {
  type ChangeListener,
  openToolSession,
  type SessionRequest,
  ToolSession,
  type ToolSessionOptions,
} from './session.js';
export * from './tool-calls.js';
