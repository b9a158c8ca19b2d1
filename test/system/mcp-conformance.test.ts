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
 * - server-sse-polling: needs a tool that closes the stream mid-call (only warnings otherwise);
 * - tools-call-with-progress: progress over MCP is the tasks issue's (PROTOCOL 11).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
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

  beforeAll(async () => {
    bus = await startSecuredBus({ trust: false });
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
