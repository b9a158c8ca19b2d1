/**
 * What a finished task keeps of its result, in bytes as stored (issue 41's attack on results,
 * `attack-result-bytes.test.ts`): bytes in a result are kept as bytes (MessagePack in base64),
 * never as a JSON object of one key per byte, and read back as they were; a task whose result
 * cannot be written ends at once with a small error result saying so, not later with a
 * takeover's false "may have run"; and each live task counts room for its finished record
 * against its principal's byte share, so results arriving after the check cannot grow the share
 * past its bound.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { MAX_FINISHED_TASK_BYTES, type Task } from '../../src/tasks/types.js';
import { uniqueMount } from '../harness/bus.js';
import { startTaskBus, type TaskBus } from '../harness/slow-mount.js';
import { startTarget, type Target } from '../harness/targets.js';

const SLOW = uniqueMount('slow');
const TARGET = uniqueMount('results');
const KEY = 'tasks-result-bytes';
const tool = (name: string, op: string, resultMode?: 'text') => ({
  name,
  description: name,
  inputSchema: { type: 'object' as const },
  target: TARGET,
  op,
  ...(resultMode === undefined ? {} : { resultMode }),
});
const context = {
  key: KEY,
  title: 'Results',
  description: 'tools whose results test what a task keeps',
  matrixTools: [
    tool('small_bytes', '$smallBytes'),
    tool('long_text', '$longText', 'text'),
    tool('held', '$held', 'text'),
  ],
  permissions: { approval: 'never' as const },
};
const session = { profile: 'default', toolContextRefs: [KEY] };

/** A target for every test: bytes, a long text, and a text held until `release`. */
async function startResults(bus: TaskBus): Promise<{ target: Target; release: () => void }> {
  let release: () => void = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  const target = await startTarget(bus.nc, TARGET, {
    $smallBytes: () => ({ b: new Uint8Array(100).fill(7), n: 1 }),
    $longText: () => ({ text: 'x'.repeat(8_000) }),
    $held: async () => {
      await held;
      return { text: 'y'.repeat(60_000) };
    },
  });
  return { target, release };
}

async function startTask(bus: TaskBus, who: object, id: string, name: string): Promise<Task | ToolResult> {
  const reply = await bus.client.request<{ task: Task } | ToolResult>(
    'system.dispatcher',
    '$call',
    { session, call: { id, name, arguments: {} }, task: {} },
    who,
  );
  return 'task' in reply ? reply.task : reply;
}

async function resultOf(bus: TaskBus, who: object, taskId: string): Promise<ToolResult> {
  return bus.client.request<ToolResult>('system.tasks', '$result', { taskId, waitMs: 15_000 }, who);
}

describe('a finished task’s result as stored', () => {
  let bus: TaskBus;
  let results: { target: Target; release: () => void };

  beforeAll(async () => {
    bus = await startTaskBus(SLOW, context, { timeoutMs: 20_000 });
    results = await startResults(bus);
  });
  afterAll(async () => {
    results?.target.stop();
    await bus?.stop();
  });

  it('keeps bytes as bytes: base64 in the record, read back as they were', async () => {
    const who = { principal: 'agent:small-bytes', session: 's1' };
    const task = (await startTask(bus, who, 'b1', 'small_bytes')) as Task;
    const result = await resultOf(bus, who, task.taskId);
    expect(result.isError).toBe(false);
    const structured = result.structured as { b: Uint8Array; n: number };
    expect(structured.b).toBeInstanceOf(Uint8Array);
    expect(new Uint8Array(structured.b)).toEqual(new Uint8Array(100).fill(7));
    expect(structured.n).toBe(1);
    expect(result.content).toBe('{"b":"<100 bytes>","n":1}');
    const [key] = await bus.runner.store.keysOf(who);
    const text = Buffer.from((await bus.runner.store.bucket.get(key as string))?.value ?? []).toString('utf8');
    expect(text).not.toContain('"99":7');
    expect(text.length).toBeLessThan(2_048);
  });

  it('ends a task whose result cannot be written at once, with a small error saying so', async () => {
    // Values past 4 KiB are refused by the bucket's stream: the 8,000-character result's record is.
    const jsm = await jetstreamManager(bus.nc);
    const stream = await jsm.streams.info(`KV_${bus.bucket}`);
    await jsm.streams.update(stream.config.name, { ...stream.config, max_msg_size: 4_096 });
    try {
      const who = { principal: 'agent:unkept', session: 's2' };
      const task = (await startTask(bus, who, 'l1', 'long_text')) as Task;
      const t0 = performance.now();
      const result = await resultOf(bus, who, task.taskId);
      const ms = performance.now() - t0;
      console.log(`unkept result: ${result.error?.code} in ${ms.toFixed(0)} ms: ${result.content}`);
      expect(result).toMatchObject({ isError: true, error: { code: 'internal' } });
      expect(result.content).toContain('ran and its target answered, but the service could not keep its result');
      expect(result.content).not.toContain('may have run');
      const listed = await bus.client.request<{ tasks: Task[] }>('system.tasks', '$list', {}, who);
      expect(listed.tasks.map((t) => t.status)).toEqual(['failed']);
    } finally {
      await jsm.streams.update(stream.config.name, { ...stream.config, max_msg_size: -1 });
    }
  });
});

describe('a principal’s byte share and the results its live tasks will keep', () => {
  let bus: TaskBus;
  let results: { target: Target; release: () => void };
  // Room for three live tasks' finished records, not four.
  const SHARE = 3 * MAX_FINISHED_TASK_BYTES + 64 * 1024;

  beforeAll(async () => {
    bus = await startTaskBus(SLOW, context, { timeoutMs: 20_000, runner: { maxBytesPerPrincipal: SHARE } });
    results = await startResults(bus);
  });
  afterAll(async () => {
    results?.release();
    results?.target.stop();
    await bus?.stop();
  });

  it('counts each live task as its finished record may be, so their results stay within the share', async () => {
    const who = { principal: 'agent:growing', session: 's3' };
    const tasks: Task[] = [];
    for (let i = 0; i < 3; i++) tasks.push((await startTask(bus, who, `h${i}`, 'held')) as Task);
    expect(tasks.every((t) => t.status === 'working')).toBe(true);
    // Small as it is now (arguments {}), the fourth would grow past the share once it ended.
    const refused = (await startTask(bus, who, 'h3', 'held')) as ToolResult;
    expect(refused).toMatchObject({ isError: true, error: { code: 'unavailable' } });
    results.release();
    for (const t of tasks) expect((await resultOf(bus, who, t.taskId)).isError).toBe(false);
    let kept = 0;
    for (const key of await bus.runner.store.keysOf(who))
      kept += key.length + ((await bus.runner.store.bucket.get(key))?.value.length ?? 0);
    console.log(`three finished tasks of 60,000-character results keep ${kept} bytes; share ${SHARE}`);
    expect(kept).toBeLessThanOrEqual(SHARE);
  });
});
