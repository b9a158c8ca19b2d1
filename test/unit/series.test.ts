import { describe, expect, it } from 'vitest';
import type { CallEvent } from '../../src/audit/events.js';
import { Attr, callAttributes } from '../../src/telemetry/calls.js';
import { OVERFLOW_TOOL, SeriesBound, UNKNOWN_TOOL, UNVERIFIED_TOOL } from '../../src/telemetry/series.js';

const event = (name: string, more: Partial<CallEvent> = {}): CallEvent => ({
  callId: name,
  name,
  outcome: 'error',
  code: 'not_found',
  durationMs: 1,
  attempts: 0,
  at: new Date().toISOString(),
  ...more,
});

describe('the series a call is counted in', () => {
  it('names a tool only when the session had it; otherwise a fixed label, whatever the caller sent', () => {
    const bound = new SeriesBound({ [Attr.ToolName]: OVERFLOW_TOOL });
    expect(
      callAttributes(event('weather_now', { target: 'app.weather', outcome: 'ok', code: undefined }), bound),
    ).toEqual({ [Attr.ToolName]: 'weather_now', [Attr.Outcome]: 'ok' });
    expect(callAttributes(event('matrix_introspect', { grantFailure: 'missing' }), bound)[Attr.ToolName]).toBe(
      UNVERIFIED_TOOL,
    );
    expect(callAttributes(event('made_up'), bound)[Attr.ToolName]).toBe(UNKNOWN_TOOL);
  });

  it('holds at most its bound of series over its life, every later one in the one overflow series', () => {
    const bound = new SeriesBound({ [Attr.ToolName]: OVERFLOW_TOOL }, 10);
    const labels = new Set<string>();
    for (let i = 0; i < 1_000; i++)
      labels.add(String(callAttributes(event(`tool_${i}`, { target: 'app.x' }), bound)[Attr.ToolName]));
    expect(labels.size).toBe(11);
    expect(labels.has(OVERFLOW_TOOL)).toBe(true);
    expect(bound.size).toBe(10);
    expect(callAttributes(event('tool_3', { target: 'app.x' }), bound)[Attr.ToolName]).toBe('tool_3');
  });
});
