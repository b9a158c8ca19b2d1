/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance) against
 * `matrix-tools mcp --http` as a user runs it: the built CLI as the `agent` user of
 * deploy/nats.conf, serving a profile whose context carries the suite's fixture tools (each a
 * registered projection onto a test mount). Every server scenario that applies to a
 * tools-only server must pass. Those that do not apply, and why:
 * - logging, completion, resources, prompts: capabilities a tools-only server does not declare;
 * - sampling and elicitation: a bus tool cannot ask the MCP client anything;
 * - image, audio, embedded-resource and mixed content: a ToolResult's content is text;
 * - tools-call-with-logging: the bridge sends no log notifications;
 * - server-sse-polling: needs a tool that closes the stream mid-call (only warnings otherwise).
 * The progress fixture reports 150 ms apart, not the suite's suggested 50: the dispatcher relays
 * at most one report each 100 ms (PROTOCOL 10).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { Mount } from '../../src/bus/mount.js';
import { tracked } from '../harness/children.js';
import { eventually } from '../harness/eventually.js';
import { type SecuredBus, startSecuredBus, users } from '../harness/identity.js';
import { CLI_MAIN } from '../harness/mcp.js';

/** The server scenarios that apply to a tools-only server. */
const APPLICABLE_SCENARIOS = [
  'server-initialize',
  'ping',
  'tools-list',
  'tools-call-simple-text',
  'tools-call-error',
  'json-schema-2020-12',
  'tools-call-with-progress',
  'server-sse-multiple-streams',
  'dns-rebinding-protection',
] as const;

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
          address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } },
        },
        properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
        additionalProperties: false,
      },
      target: 'app.spy',
      op: '$run',
    },
  ],
  permissions: { approval: 'never' },
};

/** Runs one scenario; resolves with its exit code and what it printed. */
function runScenario(url: string, scenario: string): Promise<{ code: number | null; output: string }> {
  const child = tracked(
    spawn(process.execPath, [SUITE, 'server', '--url', url, '--scenario', scenario], { stdio: 'pipe' }),
  );
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, output })));
}

describe('the MCP conformance suite against mcp --http', () => {
  let bus: SecuredBus;
  let url = '';
  let bridgeLog = '';
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
      },
    }).start();
    const operator = new BusClient(await bus.connect('operator'), { timeoutMs: 5_000 });
    await operator.request('system.tools', '$register', { spec: fixtures });
    operator.close();
    const child = tracked(
      spawn(
        process.execPath,
        [CLI_MAIN, 'mcp', '--http', '--port', '0', '--profile', 'default', '--refs', 'conformance'],
        {
          env: {
            ...process.env,
            NATS_URL: bus.server.url,
            NATS_USER: users.agent.user,
            NATS_PASSWORD: users.agent.pass,
            NATS_INBOX_PREFIX: users.agent.inboxPrefix,
            MATRIX_TRUSTED_ISSUERS: '',
          },
          stdio: 'pipe',
        },
      ),
    );
    child.stderr.on('data', (d: Buffer) => (bridgeLog += d.toString()));
    stopBridge = () => child.kill('SIGTERM');
    url = await eventually(() => /ready on (http:\S+)/.exec(bridgeLog)?.[1] ?? false, { timeoutMs: 20_000 });
  }, 60_000);
  afterAll(async () => {
    stopBridge();
    await reporter?.stop();
    await bus?.stop();
  });

  it.each(APPLICABLE_SCENARIOS)(
    'passes %s',
    async (scenario) => {
      const { code, output } = await runScenario(url, scenario);
      expect(output, output).not.toMatch(/FAILURE|✗|Failed:/);
      expect(code, output).toBe(0);
    },
    60_000,
  );
});
