/**
 * A finished task's record is at most `MAX_FINISHED_TASK_BYTES` as stored, whatever its result
 * holds: a dispatcher with a larger cap than the default, or a `structured` of bytes (kept as
 * base64, a third larger). Past it `structured` and progress go, then the content is cut, and the
 * content says what went (issue 41's attack: finished records were up to six times the cap).
 */
import { describe, expect, it } from 'vitest';
import { withinFinishedBound } from '../../src/tasks/runner.js';
import { encodeTask } from '../../src/tasks/store.js';
import { MAX_FINISHED_TASK_BYTES, type TaskRecord } from '../../src/tasks/types.js';

function record(result: TaskRecord['result']): TaskRecord {
  const at = new Date(0).toISOString();
  return {
    task: {
      taskId: 'AAAAAAAAAAAAAAAAAAAAAA',
      callId: 'c1',
      name: 'tool',
      status: 'completed',
      progress: { progress: 1, message: 'p'.repeat(2_000) },
      createdAt: at,
      lastUpdatedAt: at,
      ttlMs: 600_000,
      pollIntervalMs: 1_000,
    },
    owner: { principal: 'agent:a', session: 's' },
    call: { id: 'c1', name: 'tool' },
    argumentsDigest: '0'.repeat(64),
    context: {},
    phase: 'sent',
    idempotent: false,
    result,
    expiresAt: 600_000,
    lease: { holder: 'i', until: 0 },
  };
}

describe('a finished task’s record', () => {
  it('is kept whole within the bound, bytes as base64', () => {
    const kept = record({
      callId: 'c1',
      name: 'tool',
      isError: false,
      content: '{"b":"<30000 bytes>"}',
      structured: { b: new Uint8Array(30_000) },
      durationMs: 1,
    });
    const before = structuredClone(kept);
    expect(withinFinishedBound(kept)).toEqual(before);
    expect(encodeTask(kept).length).toBeLessThan(43_000);
  });

  it('drops structured and progress, then cuts content, past the bound, saying what went', () => {
    const big = withinFinishedBound(
      record({
        callId: 'c1',
        name: 'tool',
        isError: false,
        content: '\u0001'.repeat(200_000),
        structured: { b: new Uint8Array(60_000) },
        durationMs: 1,
      }),
    );
    expect(encodeTask(big).length).toBeLessThanOrEqual(MAX_FINISHED_TASK_BYTES);
    expect(big.result?.structured).toBeUndefined();
    expect(big.task.progress).toBeUndefined();
    expect(big.result?.truncated?.total).toBe(200_000);
    expect(big.result?.content).toMatch(/its structured reply left out and its content cut to fit/);
    const onlyStructured = withinFinishedBound(
      record({
        callId: 'c1',
        name: 'tool',
        isError: false,
        content: 'short',
        structured: new Uint8Array(90_000),
        durationMs: 1,
      }),
    );
    expect(onlyStructured.result?.content).toBe(
      `short\n…[its structured reply left out to fit the task's record of ${MAX_FINISHED_TASK_BYTES} bytes]`,
    );
    expect(onlyStructured.result?.truncated).toBeUndefined();
  });
});
