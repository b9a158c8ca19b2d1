/**
 * The span parent of a call's telemetry: the caller's `traceparent` when it is W3C trace context
 * (`vv-<32 hex>-<16 hex>-<2 hex>`, nothing before or after), read by the one pattern the bus
 * reads the header with; anything else starts a trace of its own.
 */
import { trace } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import { traceIdOf } from '../../src/bus/headers.js';
import { parentContext } from '../../src/telemetry/calls.js';

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const SPAN_ID = 'b7ad6b7169203331';
const TRACEPARENT = `00-${TRACE_ID}-${SPAN_ID}-01`;

describe("a call span's parent", () => {
  it('is the span a W3C traceparent names, sampled as its flags say', () => {
    expect(trace.getSpanContext(parentContext(TRACEPARENT))).toEqual({
      traceId: TRACE_ID,
      spanId: SPAN_ID,
      traceFlags: 1,
      isRemote: true,
    });
    expect(trace.getSpanContext(parentContext(`00-${TRACE_ID}-${SPAN_ID}-00`))?.traceFlags).toBe(0);
  });

  it('is none for a traceparent with text after its flags, as the bus reads it', () => {
    for (const traceparent of [`${TRACEPARENT}-extra`, `${TRACEPARENT}0`, `${TRACEPARENT} `]) {
      expect(traceIdOf(traceparent), traceparent).toBeUndefined();
      expect(trace.getSpanContext(parentContext(traceparent)), traceparent).toBeUndefined();
    }
  });

  it('is none without a traceparent, or with one that is not W3C-shaped', () => {
    for (const traceparent of [undefined, '', `00-${TRACE_ID.toUpperCase()}-${SPAN_ID}-01`, `x${TRACEPARENT}`]) {
      expect(trace.getSpanContext(parentContext(traceparent)), traceparent).toBeUndefined();
    }
  });
});
