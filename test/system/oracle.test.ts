/**
 * The oracle's side under the least-privilege deployment: a session opened with a grant as the
 * `agent` user of deploy/nats.conf, its calls through system.dispatcher.$call, and an oracle in
 * each framework (examples/) run with that framework's own fake model: the model is offered the
 * session's tools with their schemas, a good call's result and a bad call's dispatcher message
 * reach it, a gated call is refused, an aborted signal stops the call.
 */
import { AIMessage, AIMessageChunk, ToolMessage } from '@langchain/core/messages';
import { FakeStreamingChatModel } from '@langchain/core/utils/testing';
import { setTracingDisabled } from '@openai/agents';
import { assistantMessage, functionCall, ScriptedModel } from '@openai/agents/testing';
import { MockLanguageModelV4 } from 'ai/test';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aiSdkOracle } from '../../examples/oracle-ai-sdk.js';
import { langChainOracle } from '../../examples/oracle-langchain.js';
import { agentsOracle } from '../../examples/oracle-openai-agents.js';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import { Mount } from '../../src/bus/mount.js';
import { openToolSession, type ToolSessionOptions, toolResultMessage } from '../../src/index.js';
import { eventually } from '../harness/eventually.js';
import { type SecuredBus, SPY_SLOW_MS, startSecuredBus, users } from '../harness/identity.js';

/** How long app.spy's `$slow` takes: a call stopped early ends well before. */
const SLOW_MS = SPY_SLOW_MS;

const echoSchema = {
  type: 'object',
  properties: { city: { type: 'string', description: 'a city' } },
  required: ['city'],
  additionalProperties: false,
};

/** The oracle's contexts: a tool with a schema, a slow one, and a gated one (the policy denies it). */
const oracleTools = {
  key: 'oracle-tools',
  title: 'Oracle tools',
  description: 'tools on app.spy',
  instructions: 'Ask app.spy.',
  matrixTools: [
    { name: 'spy_echo', description: 'runs on app.spy', inputSchema: echoSchema, target: 'app.spy', op: '$run' },
    { name: 'spy_slow', description: 'takes 300 ms', inputSchema: { type: 'object' }, target: 'app.spy', op: '$slow' },
  ],
  permissions: { approval: 'never' },
};
const gatedTools = {
  key: 'oracle-gated',
  title: 'Gated',
  description: 'a tool a person must approve',
  matrixTools: [
    {
      name: 'spy_delete',
      description: 'deletes on app.spy',
      inputSchema: { type: 'object' },
      target: 'app.spy',
      op: '$delete',
    },
  ],
  permissions: { approval: 'always' },
};

/** A tool that reports progress (on a Mount at app.secret), and one that runs only as a task. */
const workTools = {
  key: 'oracle-work',
  title: 'Work',
  description: 'tools that take a while',
  matrixTools: [
    {
      name: 'secret_work',
      description: 'works in two steps',
      inputSchema: { type: 'object' },
      target: 'app.secret',
      op: '$work',
    },
    {
      name: 'spy_task_only',
      description: 'runs only as a task',
      inputSchema: { type: 'object' },
      target: 'app.spy',
      op: '$run',
      execution: { taskSupport: 'required' },
    },
  ],
  permissions: { approval: 'never' },
};

let bus: SecuredBus;
let operator: BusClient;
let options: ToolSessionOptions;

beforeAll(async () => {
  setTracingDisabled(true);
  bus = await startSecuredBus();
  operator = new BusClient(await bus.connect('operator'), { timeoutMs: 5_000 });
  for (const spec of [oracleTools, gatedTools]) await operator.request('system.tools', '$register', { spec });
  const grant = bus.grant({ resolve: { profile: 'default', toolContextRefs: ['oracle-tools', 'oracle-gated'] } });
  options = { grant, servers: bus.server.url, ...users.agent };
}, 60_000);

afterAll(async () => {
  operator?.close();
  // The calls the tests aborted still run at app.spy for up to 300 ms; the harness closes the
  // targets before the service, which would then wait out the dispatcher's deadline for them.
  await new Promise((resolve) => setTimeout(resolve, SLOW_MS + 100));
  await bus?.stop();
});

describe('openToolSession, as the agent user with a grant', () => {
  it('resolves the grant’s tools, typed in the format asked for, with the instructions and digest', async () => {
    const session = await openToolSession({ ...options, format: 'openai' });
    try {
      expect(session.tools.map((t) => t.name)).toEqual(['spy_echo', 'spy_slow', 'spy_delete']);
      expect(session.providerTools.map((t) => t.function.name)).toEqual(['spy_echo', 'spy_slow', 'spy_delete']);
      expect(session.providerTools[0]?.function.parameters).toEqual(echoSchema);
      expect(session.instructions).toContain('Ask app.spy.');
      expect(session.digest).toMatch(/^[0-9a-f]{64}$/);
      expect(session.context.principal).toBe('agent:alpha');
    } finally {
      await session.close();
    }
  });

  it('takes its replies on the inbox prefix of the NATS user its grant is bound to (_INBOX_agent)', async () => {
    const { inboxPrefix: _given, ...withoutInbox } = options;
    const bound = bus.grant({
      user: users.agent.user,
      account: 'AGENTS',
      resolve: { profile: 'default', toolContextRefs: ['oracle-tools'] },
    });
    const session = await openToolSession({ ...withoutInbox, grant: bound });
    try {
      expect(session.tools.map((t) => t.name)).toEqual(['spy_echo', 'spy_slow']);
    } finally {
      await session.close();
    }
  });

  it('runs an OpenAI tool_call, a Responses function_call and an Anthropic tool_use as they come', async () => {
    const session = await openToolSession(options);
    try {
      const chat = await session.call({
        id: 'call_1',
        type: 'function',
        function: { name: 'spy_echo', arguments: '{"city":"Lisbon"}' },
      });
      expect(chat).toMatchObject({ callId: 'call_1', isError: false, structured: { ran: true } });
      expect(toolResultMessage(chat, 'openai')).toEqual({
        role: 'tool',
        tool_call_id: 'call_1',
        content: chat.content,
      });
      const responses = await session.call({
        type: 'function_call',
        call_id: 'fc_1',
        name: 'spy_echo',
        arguments: '{"city":"Porto"}',
      });
      expect(toolResultMessage(responses, 'openai-responses')).toEqual({
        type: 'function_call_output',
        call_id: 'fc_1',
        output: responses.content,
      });
      const bad = await session.call({ type: 'tool_use', id: 'toolu_1', name: 'spy_echo', input: { town: 'Faro' } });
      expect(bad).toMatchObject({ isError: true, error: { code: 'bad_request' } });
      expect(bad.content).toContain('city');
      expect(toolResultMessage(bad, 'anthropic')).toEqual({
        type: 'tool_result',
        tool_use_id: 'toolu_1',
        content: bad.content,
        is_error: true,
      });
      expect(bus.spy.seen.filter((s) => s.op === '$run').map((s) => s.args)).toContainEqual({ city: 'Porto' });
      expect(bus.spy.seen.map((s) => s.args)).not.toContainEqual({ town: 'Faro' });
    } finally {
      await session.close();
    }
  });

  it('refuses a gated call nobody approved, and the target never sees it', async () => {
    const session = await openToolSession(options);
    try {
      const deletes = bus.spy.count('$delete');
      const refused = await session.call({ id: 'g1', name: 'spy_delete', arguments: {} });
      expect(refused).toMatchObject({ isError: true, error: { code: 'approval_denied' } });
      expect(bus.spy.count('$delete')).toBe(deletes);
    } finally {
      await session.close();
    }
  });

  it('stops a call when its signal aborts, with the signal’s reason', async () => {
    const session = await openToolSession(options);
    try {
      const started = Date.now();
      const call = session.call({ id: 's1', name: 'spy_slow' }, { signal: AbortSignal.timeout(50) });
      await expect(call).rejects.toMatchObject({ name: 'TimeoutError' });
      expect(Date.now() - started).toBeLessThan(SLOW_MS);
    } finally {
      await session.close();
    }
  });

  it('tells onChange listeners when the session’s digest changes, and only then', async () => {
    const session = await openToolSession(options);
    try {
      const seen: string[] = [];
      session.onChange((s) => seen.push(s.digest));
      const before = session.digest;
      await operator.request('system.tools', '$register', {
        spec: { ...oracleTools, instructions: 'Ask app.spy, politely.' },
      });
      await operator.request('system.tools', '$register', { spec: { ...oracleTools, key: 'oracle-unrelated' } });
      await eventually(() => expect(seen).toHaveLength(1));
      expect(seen[0]).not.toBe(before);
      expect(session.digest).toBe(seen[0]);
      expect(session.instructions).toContain('Ask app.spy, politely.');
    } finally {
      await session.close();
    }
  });

  it('connects from the NATS_* environment when connectBus is given no options', async () => {
    const saved = { ...process.env };
    Object.assign(process.env, {
      NATS_URL: bus.server.url,
      NATS_USER: users.agent.user,
      NATS_PASSWORD: users.agent.pass,
      NATS_INBOX_PREFIX: users.agent.inboxPrefix,
    });
    try {
      const nc = await connectBus();
      expect(nc.getServer()).toBe(new URL(bus.server.url).host);
      await nc.close();
    } finally {
      for (const key of ['NATS_URL', 'NATS_USER', 'NATS_PASSWORD', 'NATS_INBOX_PREFIX']) {
        if (saved[key] === undefined) delete process.env[key];
        else process.env[key] = saved[key];
      }
    }
  });
});

/** The model's three calls of every framework test: a good one, a bad one (no `city`), a gated one. */
const scripted = [
  { id: 'c-good', name: 'spy_echo', args: { city: 'Lisbon' } },
  { id: 'c-bad', name: 'spy_echo', args: { town: 'Faro' } },
  { id: 'c-gated', name: 'spy_delete', args: {} },
] as const;

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

describe('a session’s calls as tasks, with progress and cancellation (PROTOCOL 9–10)', () => {
  let worker: Mount;
  let tasked: ToolSessionOptions;

  beforeAll(async () => {
    // app.secret's raw target gives way to a Mount whose op reports progress.
    bus.secret.stop();
    worker = await new Mount(await bus.connect('secret'), {
      name: 'app.secret',
      version: '1.0.0',
      description: 'reports progress',
      ops: {
        $work: {
          description: 'works in two steps',
          request: { type: 'object' },
          response: { type: 'object' },
          handle: async (_req, ctx) => {
            for (const step of [1, 2]) {
              await new Promise((resolve) => setTimeout(resolve, 150));
              ctx.progress(step, 2, `step ${step}`);
            }
            await new Promise((resolve) => setTimeout(resolve, 150));
            return { worked: true };
          },
        },
      },
    }).start();
    await operator.request('system.tools', '$register', { spec: workTools });
    tasked = {
      ...options,
      grant: bus.grant({ resolve: { profile: 'default', toolContextRefs: ['oracle-tools', 'oracle-work'] } }),
    };
  });
  afterAll(async () => {
    await worker?.stop();
  });

  it('relays a plain call’s progress, and returns its result', async () => {
    const session = await openToolSession(tasked);
    try {
      const seen: string[] = [];
      const result = await session.call(
        { id: 'w1', name: 'secret_work' },
        { onProgress: (p) => seen.push(`${p.progress}/${p.total} ${p.message}`) },
      );
      expect(result).toMatchObject({ isError: false, structured: { worked: true } });
      // The dispatcher thins reports to one each 100 ms: under load the second may be folded away.
      expect(seen[0]).toBe('1/2 step 1');
      expect(seen.every((line) => ['1/2 step 1', '2/2 step 2'].includes(line))).toBe(true);
    } finally {
      await session.close();
    }
  });

  it('runs a call as a task with task: true, and waits for its result', async () => {
    const session = await openToolSession(tasked);
    try {
      const result = await session.call({ id: 'w2', name: 'secret_work' }, { task: true });
      expect(result).toMatchObject({ callId: 'w2', isError: false, structured: { worked: true } });
      const agent = new BusClient(await bus.connect('agent'), { timeoutMs: 5_000 });
      const { tasks } = await agent.request<{ tasks: Array<{ callId: string; status: string }> }>(
        'system.tasks',
        '$list',
        {},
        session.context,
      );
      agent.close();
      expect(tasks.find((t) => t.callId === 'w2')?.status).toBe('completed');
    } finally {
      await session.close();
    }
  });

  it('runs a tool whose taskSupport is required as a task without being told', async () => {
    const session = await openToolSession(tasked);
    try {
      const result = await session.call({ id: 'w3', name: 'spy_task_only', arguments: {} });
      expect(result).toMatchObject({ isError: false, structured: { ran: true } });
    } finally {
      await session.close();
    }
  });

  it('cancels a plain call at its target when the signal aborts', async () => {
    const session = await openToolSession(tasked);
    try {
      const cancels = bus.spy.count('$cancel');
      const controller = new AbortController();
      const call = session.call({ id: 'c-plain', name: 'spy_slow' }, { signal: controller.signal });
      await eventually(() => expect(bus.spy.count('$slow')).toBeGreaterThan(0));
      controller.abort();
      await expect(call).rejects.toMatchObject({ name: 'AbortError' });
      await eventually(() => expect(bus.spy.count('$cancel')).toBe(cancels + 1));
    } finally {
      await session.close();
    }
  });

  it('cancels a task when the signal aborts', async () => {
    const session = await openToolSession(tasked);
    try {
      const controller = new AbortController();
      const call = session.call({ id: 'c-task', name: 'secret_work' }, { task: true, signal: controller.signal });
      setTimeout(() => controller.abort(), 100);
      await expect(call).rejects.toMatchObject({ name: 'AbortError' });
      const agent = new BusClient(await bus.connect('agent'), { timeoutMs: 5_000 });
      await eventually(async () => {
        const { tasks } = await agent.request<{ tasks: Array<{ callId: string; status: string }> }>(
          'system.tasks',
          '$list',
          {},
          session.context,
        );
        expect(tasks.find((t) => t.callId === 'c-task')?.status).toBe('cancelled');
      });
      agent.close();
    } finally {
      await session.close();
    }
  });
});

describe('the AI SDK oracle (examples/oracle-ai-sdk.ts) with ai/test’s mock model', () => {
  it('offers the tools with their schemas, and the model reads each result, errors as error-text', async () => {
    const model = new MockLanguageModelV4({
      doGenerate: async ({ prompt }) =>
        prompt.some((m) => m.role === 'tool')
          ? {
              content: [{ type: 'text', text: 'done' }],
              finishReason: { unified: 'stop', raw: undefined },
              usage,
              warnings: [],
            }
          : {
              content: scripted.map((c) => ({
                type: 'tool-call' as const,
                toolCallId: c.id,
                toolName: c.name,
                input: JSON.stringify(c.args),
              })),
              finishReason: { unified: 'tool-calls', raw: undefined },
              usage,
              warnings: [],
            },
    });
    const result = await aiSdkOracle(model, 'go', options);
    expect(result.text).toBe('done');
    const offered = model.doGenerateCalls[0]?.tools ?? [];
    expect(offered.map((t) => t.name)).toEqual(['spy_echo', 'spy_slow', 'spy_delete']);
    expect(offered[0]).toMatchObject({ type: 'function', strict: true, inputSchema: { required: ['city'] } });
    const outputs = new Map<string, unknown>();
    for (const m of model.doGenerateCalls[1]?.prompt ?? [])
      if (m.role === 'tool')
        for (const part of m.content) if (part.type === 'tool-result') outputs.set(part.toolCallId, part.output);
    expect(outputs.get('c-good')).toEqual({ type: 'text', value: '{"ran":true}' });
    expect(outputs.get('c-bad')).toMatchObject({ type: 'error-text', value: expect.stringContaining('city') });
    expect(outputs.get('c-gated')).toMatchObject({ type: 'error-text', value: expect.stringMatching(/approv/i) });
  });

  it('stops a call when the generation is aborted: the model is told the call was aborted', async () => {
    const model = new MockLanguageModelV4({
      doGenerate: async () => ({
        content: [{ type: 'tool-call', toolCallId: 'c-slow', toolName: 'spy_slow', input: '{}' }],
        finishReason: { unified: 'tool-calls', raw: undefined },
        usage,
        warnings: [],
      }),
    });
    const session = await openToolSession(options);
    try {
      const { generateText } = await import('ai');
      const { aiSdkTools } = await import('../../src/adapters/ai-sdk.js');
      const started = Date.now();
      const result = await generateText({
        model,
        tools: aiSdkTools(session),
        prompt: 'go',
        abortSignal: AbortSignal.timeout(50),
      });
      expect(Date.now() - started).toBeLessThan(SLOW_MS);
      expect(result.steps[0]?.content).toContainEqual(
        expect.objectContaining({
          type: 'tool-error',
          toolCallId: 'c-slow',
          error: expect.objectContaining({ name: 'TimeoutError' }),
        }),
      );
    } finally {
      await session.close();
    }
  });
});

describe('the OpenAI Agents oracle (examples/oracle-openai-agents.ts) with a scripted Model', () => {
  it('offers the tools strict where it can, and the model reads the dispatcher’s words for each call', async () => {
    const model = new ScriptedModel([
      scripted.map((c) => functionCall(c.name, c.args, { callId: c.id })),
      [assistantMessage('done')],
    ]);
    const result = await agentsOracle(model, 'go', options);
    expect(result.finalOutput).toBe('done');
    const offered = model.calls[0]?.request.tools ?? [];
    expect(offered.map((t) => ('name' in t ? t.name : undefined))).toEqual(['spy_echo', 'spy_slow', 'spy_delete']);
    expect(offered[0]).toMatchObject({ strict: true, parameters: { required: ['city'] } });
    expect(offered[1]).toMatchObject({ strict: false });
    const outputs = new Map<string, string>();
    const input = model.calls[1]?.request.input;
    for (const item of Array.isArray(input) ? input : [])
      if (item.type === 'function_call_result' && typeof item.output === 'object' && 'text' in item.output)
        outputs.set(item.callId, item.output.text);
    expect(outputs.get('c-good')).toBe('{"ran":true}');
    expect(outputs.get('c-bad')).toContain('city');
    expect(outputs.get('c-bad')).not.toContain('An error occurred');
    expect(outputs.get('c-gated')).toMatch(/approv/i);
  });

  it('stops a call when the run’s signal aborts', async () => {
    const model = new ScriptedModel([[functionCall('spy_slow', {}, { callId: 'c-slow' })], [assistantMessage('done')]]);
    const started = Date.now();
    await expect(agentsOracleWithSignal(model, AbortSignal.timeout(50))).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(SLOW_MS);
  });
});

async function agentsOracleWithSignal(model: ScriptedModel, signal: AbortSignal) {
  const { Agent, run } = await import('@openai/agents');
  const { agentsTools } = await import('../../src/adapters/openai-agents.js');
  const session = await openToolSession(options);
  try {
    return await run(new Agent({ name: 'oracle', tools: agentsTools(session), model }), 'go', { signal });
  } finally {
    await session.close();
  }
}

describe('the LangChain oracle (examples/oracle-langchain.ts) with LangChain’s fake chat model', () => {
  it('binds the tools with their schemas, and answers each call with the dispatcher’s words', async () => {
    const model = new FakeStreamingChatModel({
      responses: [new AIMessage('done')],
      chunks: [new AIMessageChunk({ content: '', tool_calls: scripted.map((c) => ({ ...c, type: 'tool_call' })) })],
    });
    const messages = await langChainOracle(model, 'go', options);
    const results = new Map(messages.filter((m) => m instanceof ToolMessage).map((m) => [m.tool_call_id, m]));
    expect(results.get('c-good')).toMatchObject({ content: '{"ran":true}', status: 'success' });
    expect(results.get('c-bad')?.status).toBe('error');
    expect(String(results.get('c-bad')?.content)).toContain('city');
    expect(String(results.get('c-bad')?.content)).not.toContain('did not match expected schema');
    expect(results.get('c-gated')?.status).toBe('error');
    expect(String(results.get('c-gated')?.content)).toMatch(/approv/i);
    const offered = (model.bindTools(await langChainToolsOf()) as { config?: { tools?: unknown } }).config?.tools;
    expect(offered).toEqual(
      expect.arrayContaining([
        { type: 'function', function: expect.objectContaining({ name: 'spy_echo', parameters: echoSchema }) },
      ]),
    );
  });

  it('answers a call the bus refused with an error ToolMessage the model reads, instead of throwing', async () => {
    const refused = [
      { id: 'c-huge', name: 'spy_echo', args: { city: 'x'.repeat(1_100_000) } },
      { id: 'c-deep', name: 'spy_echo', args: JSON.parse(`{"city":${'['.repeat(150)}${']'.repeat(150)}}`) },
    ];
    const model = new FakeStreamingChatModel({
      responses: [new AIMessage('done')],
      chunks: [new AIMessageChunk({ content: '', tool_calls: refused.map((c) => ({ ...c, type: 'tool_call' })) })],
    });
    const messages = await langChainOracle(model, 'go', options);
    const results = new Map(messages.filter((m) => m instanceof ToolMessage).map((m) => [m.tool_call_id, m]));
    expect(results.get('c-huge')).toMatchObject({ status: 'error' });
    expect(String(results.get('c-huge')?.content)).toMatch(
      /could not be run: system\.dispatcher answered payload_too_large: /,
    );
    expect(results.get('c-deep')).toMatchObject({ status: 'error' });
    expect(String(results.get('c-deep')?.content)).toMatch(/answered bad_request: .*deep/);
    // A grant that expires after the session opened: the call is refused as forbidden, and said so.
    const brief = bus.grant({
      ttlSeconds: 2,
      resolve: { profile: 'default', toolContextRefs: ['oracle-tools'] },
    });
    const session = await openToolSession({ ...options, grant: brief });
    try {
      const { langChainTools } = await import('../../src/adapters/langchain.js');
      const echo = langChainTools(session).find((t) => t.name === 'spy_echo');
      await new Promise((resolve) => setTimeout(resolve, 2_200));
      const told = await echo?.invoke({ id: 'c-late', name: 'spy_echo', args: { city: 'Faro' }, type: 'tool_call' });
      expect(told).toBeInstanceOf(ToolMessage);
      expect(told).toMatchObject({ status: 'error', content: expect.stringMatching(/answered forbidden: .*expired/) });
      const result = await session.call({ id: 'c-late-2', name: 'spy_echo', arguments: { city: 'Faro' } });
      expect(result).toMatchObject({ isError: true, error: { code: 'forbidden' } });
    } finally {
      await session.close();
    }
  });

  it('stops a call when its signal aborts', async () => {
    const session = await openToolSession(options);
    try {
      const { langChainTools } = await import('../../src/adapters/langchain.js');
      const slow = langChainTools(session).find((t) => t.name === 'spy_slow');
      const started = Date.now();
      await expect(
        slow?.invoke(
          { id: 'c-slow', name: 'spy_slow', args: {}, type: 'tool_call' },
          { signal: AbortSignal.timeout(50) },
        ),
      ).rejects.toThrow();
      expect(Date.now() - started).toBeLessThan(SLOW_MS);
    } finally {
      await session.close();
    }
  });
});

async function langChainToolsOf() {
  const { langChainTools } = await import('../../src/adapters/langchain.js');
  const session = await openToolSession(options);
  const tools = langChainTools(session);
  await session.close();
  return tools;
}
