/**
 * Telemetry of tool calls, made from their audit events after the fact: one `execute_tool`
 * span per call (GenAI semantic conventions), a child of the caller's `traceparent`, and the
 * call metrics. Also the `$resolve` span and the approval counter.
 */
import {
  type AttributeValue,
  type Context,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { TRACEPARENT } from '../bus/headers.js';
import { activeInstruments, activeTracer } from './instruments.js';
import { OVERFLOW_TOOL, SeriesBound, toolLabel } from './series.js';

/** Span attribute names beyond the GenAI conventions. */
export const Attr = {
  OperationName: 'gen_ai.operation.name',
  ToolName: 'gen_ai.tool.name',
  ToolCallId: 'gen_ai.tool.call.id',
  ErrorType: 'error.type',
  Target: 'matrix.target',
  Op: 'matrix.op',
  Outcome: 'matrix.outcome',
  Attempts: 'matrix.attempts',
  Session: 'matrix.session',
  Principal: 'matrix.principal',
} as const;

/**
 * What telemetry reads of an ended call: the fields of the audit trail's `CallEvent` it
 * describes (an event is one), so telemetry depends on neither the audit trail nor the dispatcher.
 */
export interface ObservedCall {
  /** The tool's name, in the span's name. */
  name: string;
  callId: string;
  outcome: string;
  /** The call's duration, in ms: the span's length. */
  durationMs: number;
  /** The error code of a failed call. */
  code?: string;
  /** Requests sent to the target. */
  attempts?: number;
  target?: string;
  op?: string;
  session?: string;
  principal?: string;
  /** W3C trace context of the call: the span's parent. */
  traceparent?: string;
  /** On a call refused for its grant: which check the grant failed. */
  grantFailure?: string;
}

/**
 * The context whose span is the one a `traceparent` names; the root context when there is none,
 * or when it is not W3C trace context as the bus reads the header (`TRACEPARENT`).
 */
export function parentContext(traceparent: string | undefined): Context {
  const m = traceparent === undefined ? null : TRACEPARENT.exec(traceparent);
  if (m === null) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: m[1] as string,
    spanId: m[2] as string,
    traceFlags: Number.parseInt(m[3] as string, 16) & 1,
    isRemote: true,
  });
}

/** Emits the span and the metrics of one ended call; a no-op (no objects built) while no SDK is registered. */
export function observeCall(event: ObservedCall): void {
  const tracer = activeTracer();
  if (tracer !== undefined) {
    const end = performance.timeOrigin + performance.now();
    const span = tracer.startSpan(
      `execute_tool ${event.name}`,
      { kind: SpanKind.INTERNAL, startTime: end - event.durationMs },
      parentContext(event.traceparent),
    );
    if (span.isRecording()) describeCall(span, event);
    span.end(end);
  }
  const meters = activeInstruments();
  if (meters !== undefined) {
    const attributes = callAttributes(event, callSeries);
    meters.calls.add(1, attributes);
    meters.callDuration.record(event.durationMs / 1000, attributes);
  }
}

/** The series of the call counter and the duration histogram (they share their labels). */
const callSeries = new SeriesBound({ [Attr.ToolName]: OVERFLOW_TOOL });

/** The metric attributes of a call: a tool label no caller chose, its outcome and error type, within `bound`. */
export function callAttributes(event: ObservedCall, bound: SeriesBound): Record<string, AttributeValue> {
  const tool = toolLabel(event);
  const attributes: Record<string, AttributeValue> =
    event.code === undefined
      ? { [Attr.ToolName]: tool, [Attr.Outcome]: event.outcome }
      : { [Attr.ToolName]: tool, [Attr.Outcome]: event.outcome, [Attr.ErrorType]: event.code };
  return bound.admit(`${tool}\u0000${event.outcome}\u0000${event.code ?? ''}`, attributes);
}

function describeCall(span: Span, e: ObservedCall): void {
  span.setAttribute(Attr.OperationName, 'execute_tool');
  span.setAttribute(Attr.ToolName, e.name);
  span.setAttribute(Attr.ToolCallId, e.callId);
  span.setAttribute(Attr.Outcome, e.outcome);
  span.setAttribute(Attr.Attempts, e.attempts ?? 0);
  if (e.target !== undefined) span.setAttribute(Attr.Target, e.target);
  if (e.op !== undefined) span.setAttribute(Attr.Op, e.op);
  if (e.session !== undefined) span.setAttribute(Attr.Session, e.session);
  if (e.principal !== undefined) span.setAttribute(Attr.Principal, e.principal);
  if (e.code !== undefined) {
    span.setAttribute(Attr.ErrorType, e.code);
    span.setStatus({ code: SpanStatusCode.ERROR, message: e.code });
  }
}

/** Counts one approval decision. */
export function countApproval(approved: boolean): void {
  activeInstruments()?.approvals.add(1, { 'matrix.decision': approved ? 'approve' : 'reject' });
}

/**
 * Runs `answer` (a `$resolve`) inside a `resolve_tools <profile>` span, a child of the
 * request's `traceparent`; runs it bare while no SDK is registered.
 */
export function traceResolve<T>(
  traceparent: string | undefined,
  profile: string | undefined,
  answer: () => T | Promise<T>,
): T | Promise<T> {
  const tracer = activeTracer();
  if (tracer === undefined) return answer();
  const span = tracer.startSpan(
    `resolve_tools ${profile ?? ''}`.trimEnd(),
    { kind: SpanKind.SERVER },
    parentContext(traceparent),
  );
  if (profile !== undefined && span.isRecording()) span.setAttribute('matrix.profile', profile);
  const failed = (err: unknown): never => {
    span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
    span.end();
    throw err;
  };
  let result: T | Promise<T>;
  try {
    result = answer();
  } catch (err) {
    return failed(err);
  }
  if (!(result instanceof Promise)) {
    span.end();
    return result;
  }
  return result.then((value) => {
    span.end();
    return value;
  }, failed);
}

/**
 * Counts one `<target>.$cancel` the dispatcher sent (its caller cancelled, or its deadline passed
 * while the target worked).
 */
export function countCancel(): void {
  activeInstruments()?.cancels.add(1);
}
