/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance, 0.2 line) against
 * `matrix-tools mcp --http` as a user runs it: the built CLI as the `agent` user of
 * deploy/nats.conf, serving a profile whose contexts carry the suite's fixture tools (each a
 * registered projection onto a test mount). Every server scenario that applies to a
 * tools-and-tasks server must pass, at 2025-11-25, at 2026-07-28 and for the tasks extension.
 * Those that do not apply, and why:
 * - logging, completion, resources, prompts (and sep-2164-resource-not-found, resources-subscribe):
 *   capabilities a tools-only server does not declare;
 * - sampling, elicitation and every input-required-result-* scenario, tasks-mrtr-input,
 *   tasks-mrtr-composition: a bus tool cannot ask the MCP client anything;
 * - image, audio, embedded-resource and mixed content: a ToolResult's content is text;
 * - tools-call-with-logging: the bridge sends no log notifications;
 * - server-sse-polling: needs a tool that closes the stream mid-call (only warnings otherwise);
 * - server-session-lifecycle: 2025-03-26's session rules, older than the revisions served;
 * - http-custom-header-server-validation: needs tools declaring `x-mcp-header` parameters, which
 *   no projection has;
 * - tasks-status-notifications: the suite skips it itself (pending its subscriptions rewrite);
 * - sep-2640-skills-*: the skills extension, not served.
 * The progress fixture reports 150 ms apart, not the suite's suggested 50: the dispatcher relays
 * at most one report each 100 ms (PROTOCOL 10).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { BadRequestError } from '../../src/bus/errors.js';
import { Mount } from '../../src/bus/mount.js';
import { tracked } from '../harness/children.js';
import { type SecuredBus, startSecuredBus } from '../harness/identity.js';
import { sleepUnlessAborted, startHttpBridge } from '../harness/mcp.js';

/** The server scenarios that apply to a tools-and-tasks server, by the revision (or extension) they run at. */
const APPLICABLE_SCENARIOS = {
  '2025-11-25': [
    'server-initialize',
    'ping',
    'tools-list',
    'tools-call-simple-text',
    'tools-call-error',
    'json-schema-2020-12',
    'tools-call-with-progress',
    'server-sse-multiple-streams',
    'dns-rebinding-protection',
  ],
  '2026-07-28': [
    'tools-list',
    'tools-call-simple-text',
    'tools-call-error',
    'json-schema-2020-12',
    'tools-call-with-progress',
    'dns-rebinding-protection',
    'caching',
    'http-header-validation',
    'server-stateless',
  ],
  // The extension's scenarios are on no revision's timeline: they run without --spec-version, at
  // the revision the extension is defined for (2026-07-28).
  'io.modelcontextprotocol/tasks': [
    'tasks-lifecycle',
    'tasks-capability-negotiation',
    'tasks-wire-fields',
    'tasks-request-state-removal',
    'tasks-request-headers',
    'tasks-dispatch-and-envelope',
    'tasks-required-task-error',
  ],
} as const;

/**
 * Checks of an applicable scenario that ask for more than tools and tasks: `caching` also lists
 * prompts and resources, which a tools-only server does not have (its tools/list hints pass);
 * `server-stateless` calls a tool that needs a client capability (sampling), and a bus tool never
 * asks its client anything.
 */
const NOT_APPLICABLE_CHECKS: Readonly<Record<string, readonly string[]>> = {
  'server-stateless': ['sep-2575-server-rejects-undeclared-capability', 'sep-2575-missing-capability-http-400'],
  caching: [
    'sep-2549-prompts-list-caching-hints',
    'sep-2549-resources-list-caching-hints',
    'sep-2549-resources-templates-list-caching-hints',
  ],
};

/** The ids of the checks a scenario's output reports as failed. */
function failedChecks(output: string): string[] {
  return [...output.matchAll(/\[([\w$-]+)\s*\] FAILURE/g)].map((m) => m[1] as string);
}

const SUITE = fileURLToPath(
  new URL('../../node_modules/@modelcontextprotocol/conformance/dist/index.js', import.meta.url),
);

/** The suite's fixture tools, as projections onto app.spy (`$nope` is no op of it: a failed tool). */
const fixtures = {
  key: 'conformance',
  title: 'Conformance fixtures',
  description: 'the MCP conformance suite’s tools',
  matrixTools: [
    {
      name: 'test_simple_text',
      description: 'returns simple text',
      inputSchema: { type: 'object' },
      target: 'app.spy',
      op: '$run',
      resultMode: 'text',
    },
    {
      name: 'test_error_handling',
      description: 'always fails',
      inputSchema: { type: 'object' },
      target: 'app.spy',
      op: '$nope',
    },
    {
      name: 'test_tool_with_progress',
      description: 'reports progress 0, 50, 100 of 100',
      inputSchema: { type: 'object' },
      target: 'app.secret',
      op: '$progress',
      resultMode: 'text',
    },
    {
      name: 'json_schema_2020_12_tool',
      description: 'Tool with JSON Schema 2020-12 features',
      inputSchema: {
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        $defs: {
          address: {
            $anchor: 'addressDef',
            type: 'object',
            properties: { street: { type: 'string' }, city: { type: 'string' } },
          },
        },
        properties: {
          name: { type: 'string' },
          address: { $ref: '#/$defs/address' },
          contactMethod: { type: 'string', enum: ['phone', 'email'] },
          phone: { type: 'string' },
          email: { type: 'string' },
        },
        allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
        if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
        // JSON Schema's conditional keyword, not a thenable: the suite checks it is passed on.
        // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
        then: { required: ['phone'] },
        else: { required: ['email'] },
        additionalProperties: false,
      },
      target: 'app.spy',
      op: '$run',
    },
  ],
  permissions: { approval: 'never' },
};

/** The tasks extension's fixture tools, as projections onto app.secret's conformance ops. */
const taskFixtures = {
  key: 'conformance-tasks',
  title: 'Conformance task fixtures',
  description: 'the MCP conformance suite’s task tools',
  matrixTools: [
    {
      name: 'greet',
      description: 'greets by name, never as a task',
      inputSchema: { type: 'object', properties: { name: { type: 'string' } } },
      target: 'app.secret',
      op: '$greet',
      resultMode: 'text',
      execution: { taskSupport: 'forbidden' },
    },
    {
      name: 'slow_compute',
      description: 'sleeps `seconds`, then answers',
      inputSchema: { type: 'object', properties: { seconds: { type: 'number' }, label: { type: 'string' } } },
      target: 'app.secret',
      op: '$slow',
      resultMode: 'text',
      execution: { taskSupport: 'optional' },
    },
    {
      name: 'failing_job',
      description: 'fails as a tool after a second',
      inputSchema: { type: 'object' },
      target: 'app.secret',
      op: '$fail',
      execution: { taskSupport: 'required' },
    },
    {
      name: 'protocol_error_job',
      description: 'fails inside the service',
      inputSchema: { type: 'object' },
      target: 'app.secret',
      op: '$crash',
      execution: { taskSupport: 'optional' },
    },
  ],
  permissions: { approval: 'never' },
};

/** Runs one scenario at one revision (an extension's at its own); resolves with its exit code and what it printed. */
function runScenario(
  url: string,
  scenario: string,
  revision: string,
): Promise<{ code: number | null; output: string }> {
  const child = tracked(
    spawn(
      process.execPath,
      [
        SUITE,
        'server',
        '--url',
        url,
        '--scenario',
        scenario,
        ...(revision.includes('/') ? [] : ['--spec-version', revision]),
      ],
      {
        stdio: 'pipe',
      },
    ),
  );
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, output })));
}

describe('the MCP conformance suite against mcp --http', () => {
  let bus: SecuredBus;
  let url = '';
  let stopBridge = () => {};
  let reporter: Mount | undefined;

  beforeAll(async () => {
    bus = await startSecuredBus({ trust: false });
    // app.secret's raw target gives way to a Mount whose op reports progress.
    bus.secret.stop();
    reporter = await new Mount(await bus.connect('secret'), {
      name: 'app.secret',
      version: '1.0.0',
      description: 'the progress fixture',
      ops: {
        $progress: {
          description: 'reports 0, 50, 100 of 100',
          request: { type: 'object' },
          response: { type: 'string' },
          handle: async (_req, ctx) => {
            for (const step of [0, 50, 100]) {
              ctx.progress(step, 100);
              await new Promise((resolve) => setTimeout(resolve, 150));
            }
            return 'progressed to 100 of 100';
          },
        },
        $greet: {
          description: 'Hello, {name}!',
          request: { type: 'object' },
          response: { type: 'string' },
          handle: async (req) => `Hello, ${String((req as { name?: unknown }).name ?? 'World')}!`,
        },
        $slow: {
          description: 'sleeps `seconds` unless cancelled',
          request: { type: 'object' },
          response: { type: 'string' },
          handle: async (req, ctx) => {
            const seconds = Number((req as { seconds?: unknown }).seconds ?? 1);
            await sleepUnlessAborted(seconds * 1_000, ctx.signal);
            return `computed after ${seconds} s`;
          },
        },
        $fail: {
          description: 'fails as a tool after a second',
          request: { type: 'object' },
          response: { type: 'string' },
          handle: async () => {
            await new Promise((resolve) => setTimeout(resolve, 1_000));
            throw new BadRequestError('the job failed, as it always does');
          },
        },
        $crash: {
          description: 'fails inside the service',
          request: { type: 'object' },
          response: { type: 'string' },
          handle: async () => {
            throw new Error('the service broke');
          },
        },
      },
    }).start();
    const operator = new BusClient(await bus.connect('operator'), { timeoutMs: 5_000 });
    await operator.request('system.tools', '$register', { spec: fixtures });
    await operator.request('system.tools', '$register', { spec: taskFixtures });
    operator.close();
    const bridge = await startHttpBridge(bus.server.url, [
      '--profile',
      'default',
      '--refs',
      'conformance,conformance-tasks',
    ]);
    stopBridge = bridge.stop;
    url = bridge.url;
  }, 60_000);
  afterAll(async () => {
    stopBridge();
    await reporter?.stop();
    await bus?.stop();
  });

  const cases = Object.entries(APPLICABLE_SCENARIOS).flatMap(([revision, scenarios]) =>
    scenarios.map((scenario) => [revision, scenario] as const),
  );
  it.each(cases)(
    'passes at %s: %s',
    async (revision, scenario) => {
      const { code, output } = await runScenario(url, scenario, revision);
      const excused = NOT_APPLICABLE_CHECKS[scenario] ?? [];
      expect(output, output).toMatch(/SUCCESS/);
      expect(
        failedChecks(output).filter((id) => !excused.includes(id)),
        output,
      ).toEqual([]);
      if (excused.length === 0) expect(code, output).toBe(0);
    },
    60_000,
  );
});
