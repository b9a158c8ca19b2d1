/**
 * Attack (issue 41, claim "tasks are bounded per principal: 32 live tasks"): each instance of the
 * service checks a new task against what it knows of the principal's tasks: its own creations in
 * progress and what its watch of KV `matrix-tasks` has heard (src/tasks/runner.ts `refusal`,
 * src/tasks/known.ts `reserve`). Two instances answer `$call` in one queue group; a burst of
 * task calls from one principal is split between them, and each lets through 32 before it
 * hears of the other's. Found 2026-12-06: 64 calls at once made 57 tasks (50 working at once by
 * `$list`); the same burst against one instance made exactly 32. Records and bytes per principal
 * are checked the same way, so their shares stretch with the instances too (not measured).
 * What should hold: however many instances run, one principal holds at
 * most 32 live tasks; the rest are refused (`unavailable`, too many tasks).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { MAX_LIVE_TASKS_PER_PRINCIPAL, type Task } from '../../src/tasks/types.js';
import { type SecuredBus, startSecuredBus } from '../harness/identity.js';

/** Calls the burst makes at once: twice the bound. */
const BURST = 2 * MAX_LIVE_TASKS_PER_PRINCIPAL;

const holdContext = {
  key: 'hold-tools',
  title: 'Hold',
  description: 'a tool that holds its call for 3 s',
  matrixTools: [
    { name: 'hold', description: 'holds', inputSchema: { type: 'object' }, target: 'app.spy', op: '$hold' },
  ],
  permissions: { approval: 'never' },
};
const session = { profile: 'default', toolContextRefs: ['hold-tools'] };

describe('live tasks of one principal across two instances', () => {
  let bus: SecuredBus;
  let agent: BusClient;
  let grant: string;

  beforeAll(async () => {
    bus = await startSecuredBus();
    await bus.startInstance();
    const operator = new BusClient(await bus.connect('operator'), { timeoutMs: 10_000 });
    await operator.request('system.tools', '$register', { spec: holdContext });
    operator.close();
    grant = bus.grant({ principal: 'agent:tasks', session: 'sess-tasks', resolve: session });
    agent = new BusClient(await bus.connect('agent'), { timeoutMs: 30_000 });
    // Both instances have resolved the session once (its first call is not part of the burst).
    for (let i = 0; i < 4; i++)
      await agent.request('system.tools', '$resolve', session, { grant }).catch(() => undefined);
  }, 90_000);

  afterAll(async () => {
    agent?.close();
    await bus?.stop();
  });

  it(`holds one principal to ${MAX_LIVE_TASKS_PER_PRINCIPAL} live tasks`, async () => {
    const replies = await Promise.all(
      Array.from({ length: BURST }, (_, i) =>
        agent.request<{ task: Task } | ToolResult>(
          'system.dispatcher',
          '$call',
          { session, call: { id: `t${i}`, name: 'hold', arguments: {} }, task: { ttlMs: 60_000 } },
          { grant },
        ),
      ),
    );
    const made = replies.filter((r): r is { task: Task } => 'task' in r);
    const refused = replies.filter((r): r is ToolResult => !('task' in r));
    const live = await agent.request<{ tasks: Task[] }>('system.tasks', '$list', {}, { grant });
    const working = live.tasks.filter((t) => t.status === 'working').length;
    console.log(
      `${BURST} task calls at once over two instances: ${made.length} tasks made, ${refused.length} refused (${refused[0]?.content.slice(0, 120)}); $list says ${working} working`,
    );
    expect(made.length).toBeLessThanOrEqual(MAX_LIVE_TASKS_PER_PRINCIPAL);
    expect(working).toBeLessThanOrEqual(MAX_LIVE_TASKS_PER_PRINCIPAL);
  }, 60_000);
});
