/**
 * Attack (issue 41, claims "finished records are small" and "a hostile target cannot make the
 * dispatcher hold unbounded memory (large replies)"): a result is said to be capped (content at
 * 64 KiB), but the cap is taken of the reply's JSON text, where bytes show as `<n bytes>`; the
 * reply itself then travels whole as the result's `structured` (`structuredTravels`,
 * src/dispatcher/shape.ts). A target answering `{pad: <900,000 bytes>}` (MessagePack bin) has a
 * 27-character text, so the caller gets ~900 KB back per call (the service re-encodes and sends
 * it: in a measured flood of 1 MiB replies this was most of the service's CPU), and a task that
 * ends so puts it in its "finished" record, encoded as JSON (a Uint8Array in JSON is an object of
 * one key per byte: megabytes, past the server's max_payload): the write fails, the task stays
 * live until its lease runs out, and then ends `failed`, "the service running it stopped ... it
 * may have run" — the target's answer is lost and the model is told something false.
 * Found 2026-12-06: the $call reply was 900,105 bytes for a 24-character content; the task ended
 * failed after ~5 s with that message. And the cap counts characters, not bytes: a `text` result
 * of 65,536 control characters is within it, and its finished record took 393,907 bytes (6× the
 * cap; the share of the principal is checked only when a task is made, with its arguments).
 * What should hold: a result, as the caller receives it and as a finished task keeps it, is
 * within the cap (plus a small envelope), whatever the target's reply holds.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CONTENT_CAP } from '../../src/dispatcher/shape.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import type { Task, TaskRecord } from '../../src/tasks/types.js';
import { uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { startTaskBus, type TaskBus } from '../harness/slow-mount.js';
import { startTarget, type Target } from '../harness/targets.js';

const SLOW = uniqueMount('slow');
const BIG = uniqueMount('bytes');
/** What a result may take beyond its content cap: its ids, name, flags and a small `structured`. */
const ENVELOPE = 16 * 1024;
const session = { profile: 'default', toolContextRefs: ['attack-result-bytes'] };
const context = {
  key: 'attack-result-bytes',
  title: 'Bytes',
  description: 'a tool whose target answers with bytes',
  matrixTools: [
    { name: 'bytes', description: 'bytes', inputSchema: { type: 'object' as const }, target: BIG, op: '$bytes' },
    {
      name: 'controls',
      description: 'text of control characters',
      inputSchema: { type: 'object' as const },
      target: BIG,
      op: '$controls',
      resultMode: 'text' as const,
    },
  ],
  permissions: { approval: 'never' as const },
};

describe('a target that answers with bytes', () => {
  let bus: TaskBus;
  let target: Target;
  const who = { principal: 'agent:bytes', session: 's-bytes' };

  beforeAll(async () => {
    bus = await startTaskBus(SLOW, context, { timeoutMs: 20_000 });
    target = await startTarget(bus.nc, BIG, {
      $bytes: () => ({ pad: new Uint8Array(900_000).fill(0x61) }),
      // Within the cap as characters, six bytes each once the record is JSON (`\u0001`).
      $controls: () => ({ text: '\u0001'.repeat(DEFAULT_CONTENT_CAP) }),
    });
  });
  afterAll(async () => {
    target?.stop();
    await bus?.stop();
  });

  it('gives the caller a result within the cap', async () => {
    const raw = await bus.client.requestRaw(
      'system.dispatcher.$call',
      { session, call: { id: 'c1', name: 'bytes', arguments: {} } },
      who,
    );
    const result = raw.value as ToolResult;
    console.log(`$call reply: ${raw.bytes} bytes, content ${result.content.length} characters`);
    expect(result.isError).toBe(false);
    expect(raw.bytes).toBeLessThan(DEFAULT_CONTENT_CAP + ENVELOPE);
  });

  /** The bucket record of a task of `tool` once it ended, and its size in bytes. */
  async function finishedTask(tool: string, id: string): Promise<{ record: TaskRecord; bytes: number }> {
    const started = (await bus.client.request(
      'system.dispatcher',
      '$call',
      { session, call: { id, name: tool, arguments: {} }, task: {} },
      who,
    )) as { task: Task };
    const kv = await new Kvm(bus.nc).open(bus.bucket);
    let record: TaskRecord | undefined;
    let bytes = 0;
    await eventually(
      async () => {
        let key: string | undefined;
        for await (const k of await kv.keys(`*.${started.task.taskId}`)) key = k;
        const entry = key === undefined ? null : await kv.get(key);
        expect(entry?.value).toBeDefined();
        bytes = entry?.value.length ?? 0;
        record = JSON.parse(new TextDecoder().decode(entry?.value)) as TaskRecord;
        expect(['completed', 'failed']).toContain(record.task.status);
      },
      { timeoutMs: 15_000 },
    );
    const stream = await (await jetstreamManager(bus.nc)).streams.info(`KV_${bus.bucket}`);
    console.log(
      `finished task of ${tool}: status ${record?.task.status} (${record?.task.statusMessage}), record ${bytes} bytes; bucket ${stream.state.bytes} bytes`,
    );
    return { record: record as TaskRecord, bytes };
  }

  it('ends a task whose target answered with bytes as completed, its record small', async () => {
    const { record, bytes } = await finishedTask('bytes', 'c2');
    expect(record.task.status).toBe('completed');
    expect(bytes).toBeLessThan(DEFAULT_CONTENT_CAP + ENVELOPE);
  });

  // The cap counts characters; the record (and the principal's share, checked only when the
  // task is made) holds the result's JSON: control characters take six bytes each.
  it('keeps a finished task small whatever characters its content holds', async () => {
    const { record, bytes } = await finishedTask('controls', 'c3');
    expect(record.task.status).toBe('completed');
    expect(bytes).toBeLessThan(DEFAULT_CONTENT_CAP + ENVELOPE);
  });
});
