/**
 * The MCP bridge's `search_tools` (PROTOCOL 13), over HTTP with a grant per client, for the SDK
 * 1.32 client (2025-11-25) and the SDK 2.x client pinned to 2026-07-28, and over stdio from the
 * built CLI: past the threshold a client lists the kept tools and `search_tools`, finds a tool by
 * a need in words, gets its full definition and calls it although it was never listed; a tool
 * outside the grant is never found; at or below the threshold the list is the resolved one.
 * Every search is audited as the provider formats' is: the dispatcher's `tool_search` call, with
 * the caller's principal and session and the query's digest (never the query), refusals included.
 */
import { execFile } from 'node:child_process';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallEvent } from '../../src/audit/events.js';
import { watchCalls } from '../../src/audit/log.js';
import { sha256Hex } from '../../src/bus/codec.js';
import { Mount } from '../../src/bus/mount.js';
import { mintGrant } from '../../src/identity/mint.js';
import type { FoundTools } from '../../src/mcp/bridge-search.js';
import { type McpHttpBridge, startMcpHttp } from '../../src/mcp/http.js';
import type { McpTool } from '../../src/registry/provider-tools.js';
import type { ResolvedToolContext } from '../../src/registry/types.js';
import { sharedNatsEnv, sharedNatsUrl, testConnection } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { CLI_MAIN, initializeParams, startRawBridge } from '../harness/mcp.js';
import { searchContext as context, type SearchBus, startSearchBus } from '../harness/search.js';

/** 35 tools: past the default threshold of 30. */
const ops = context('ops', [
  ['status_show', 'Show the status of the deployment'],
  ['temperature_convert', 'Convert a temperature from Celsius to Fahrenheit'],
  ['file_read', 'Read the contents of a file'],
  ['file_write', 'Write text to a file'],
  ['dir_list', 'List the entries of a directory'],
  ['issue_create', 'Create an issue in a repository'],
  ['issue_close', 'Close an issue'],
  ['pr_merge', 'Merge a pull request'],
  ['branch_create', 'Create a git branch'],
  ['commit_log', 'Show the commit history of a branch'],
  ['email_send', 'Send an email message'],
  ['calendar_event_add', 'Add an event to the calendar'],
  ['weather_forecast', 'Get the weather forecast for a city'],
  ['currency_convert', 'Convert an amount between currencies'],
  ['timezone_now', 'Tell the current time in a time zone'],
  ['image_resize', 'Resize an image to a width and height'],
  ['pdf_extract_text', 'Extract the text of a PDF document'],
  ['url_fetch', 'Fetch a web page by its URL'],
  ['dns_lookup', 'Look up the DNS records of a domain'],
  ['ping_host', 'Check whether a host answers ping'],
  ['db_query', 'Run a read-only SQL query'],
  ['cache_flush', 'Flush the application cache'],
  ['log_tail', 'Show the last lines of a log'],
  ['metric_graph', 'Graph a metric over time'],
  ['alert_ack', 'Acknowledge an alert'],
  ['user_invite', 'Invite a user to the workspace'],
  ['user_remove', 'Remove a user from the workspace'],
  ['secret_rotate', 'Rotate a secret credential'],
  ['backup_start', 'Start a backup of the database'],
  ['backup_restore', 'Restore the database from a backup'],
  ['ticket_assign', 'Assign a support ticket to an agent'],
  ['invoice_create', 'Create an invoice for a customer'],
  ['translate_text', 'Translate text into another language'],
  ['summarize_text', 'Summarize a long text'],
  ['spell_check', 'Check the spelling of a text'],
]);
/** Three tools: below the threshold. */
const crm = context('crm', [
  ['contact_lookup', 'Find a customer contact by email address'],
  ['invoice_send', 'Send an invoice to a customer'],
  ['note_add', 'Add a note to a customer record'],
]);
// No grant below covers these; they are written to match the queries better than any granted tool.
const payroll = context('payroll', [
  [
    'celsius_fahrenheit_temperature_converter',
    'Convert a temperature in degrees Celsius to Fahrenheit, Celsius Fahrenheit',
  ],
  ['salary_export', 'Export every employee salary to a spreadsheet: salary export of salaries'],
]);
/** 40 tools whose descriptions together pass the dispatcher's content cap (64 KiB) in one search's reply. */
const manual = context(
  'manual',
  Array.from({ length: 40 }, (_, i): [string, string] => [
    `manual_chapter_${i}`,
    `Read chapter ${i} of the operations manual. ${'It explains how the manual chapter is laid out and kept. '.repeat(40)}`,
  ]),
);
const HIDDEN = /payroll|salary|celsius_fahrenheit_temperature_converter/;
const NEED = 'I need to turn degrees Celsius into Fahrenheit';

describe('search_tools on the MCP bridge', () => {
  let bus: SearchBus;
  let bridge: McpHttpBridge;
  let target: Mount;
  let wide: string;
  let narrow: string;
  let long: string;
  /** The connection the target and the bridge use, and the test watches the trail on. */
  let nc: NatsConnection;
  const open: Array<{ close(): Promise<void> }> = [];

  beforeAll(async () => {
    bus = await startSearchBus([ops, crm, payroll, manual]);
    nc = await testConnection();
    target = await new Mount(nc, {
      name: 'app.ops',
      version: '1.0.0',
      description: 'runs the ops tools',
      ops: {
        $run: {
          description: 'answers with the id it was given',
          request: { type: 'object' },
          response: { type: 'string' },
          handle: async (req) => `ran for ${String((req as { id?: unknown }).id)}`,
        },
      },
    }).start();
    const issuer = bus.issuer;
    const grant = (refs: string[], session: string) =>
      mintGrant(issuer, {
        principal: 'agent:ada',
        session,
        resolve: { profile: 'agent', toolContextRefs: refs },
        ttlSeconds: 600,
      });
    wide = grant(['ops'], 's-wide');
    narrow = grant(['crm'], 's-narrow');
    long = grant(['manual'], 's-long');
    bridge = await startMcpHttp(nc, { port: 0, issuers: [issuer.getPublicKey()], search: { keep: ['status_show'] } });
  }, 30_000);
  afterAll(async () => {
    await Promise.allSettled(open.map((c) => c.close()));
    await bridge?.close();
    await target?.stop();
    await bus?.stop();
  });

  const client2025 = async (grant: string) => {
    const client = new Client({ name: 'search-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(bridge.url), {
        requestInit: { headers: { Authorization: `Bearer ${grant}` } },
      }),
    );
    open.push(client);
    return client;
  };
  /** The SDK 2.x client pinned to 2026-07-28, under `grant`. */
  const client2026 = async (grant: string) => {
    const client = new ModernClient(
      { name: 'search-2026', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await client.connect(
      new ModernTransport(new URL(bridge.url), { requestInit: { headers: { Authorization: `Bearer ${grant}` } } }),
    );
    open.push(client);
    return client;
  };
  const resolved = (refs: string[], grant: string) =>
    bus.client.request<ResolvedToolContext>(
      'system.tools',
      '$resolve',
      { profile: 'agent', toolContextRefs: refs, format: 'mcp' },
      { grant },
    );

  it('lists the kept tools and search_tools past the threshold, finds a tool by need and calls it (2025-11-25)', async () => {
    const client = await client2025(wide);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['status_show', 'search_tools']);
    const searched = await client.callTool({ name: 'search_tools', arguments: { query: NEED } });
    expect(searched.isError).toBeFalsy();
    const found = searched.structuredContent as unknown as FoundTools;
    expect(found.tools[0]?.name).toBe('temperature_convert');
    // The full definition, as $resolve gives it, so the client can call it.
    const all = (await resolved(['ops'], wide)).providerTools as McpTool[];
    expect(found.tools[0]).toEqual(all.find((t) => t.name === 'temperature_convert'));
    expect(JSON.parse((searched.content as Array<{ text: string }>)[0]!.text)).toEqual(found);
    const called = await client.callTool({ name: 'temperature_convert', arguments: { id: '21' } });
    expect(called).toMatchObject({
      isError: false,
      content: [{ type: 'text', text: expect.stringContaining('ran for 21') }],
    });
  });

  it('never shows a tool outside the grant, whatever the query or the arguments', async () => {
    const client = await client2025(wide);
    for (const query of [NEED, 'export salary spreadsheet', 'payroll', 'celsius fahrenheit temperature converter']) {
      const searched = await client.callTool({
        name: 'search_tools',
        // A session in the arguments is not passed on: only query and limit are.
        arguments: { query, limit: 50, session: { profile: 'agent', toolContextRefs: ['payroll'] } },
      });
      expect(JSON.stringify(searched)).not.toMatch(HIDDEN);
    }
    const refused = await client.callTool({ name: 'salary_export', arguments: {} });
    expect(refused.isError).toBe(true);
    const bad = await client.callTool({ name: 'search_tools', arguments: { query: '' } });
    expect(bad).toMatchObject({ isError: true, content: [{ text: expect.stringMatching(/^Error \(bad_request\)/) }] });
  });

  it('changes nothing at or below the threshold: the list is the resolved one, search_tools no tool', async () => {
    const client = await client2025(narrow);
    const { tools } = await client.listTools();
    expect(tools).toEqual((await resolved(['crm'], narrow)).providerTools);
    const called = await client.callTool({ name: 'search_tools', arguments: { query: 'invoice' } });
    expect(called.isError).toBe(true);
    expect(JSON.stringify(called.content)).toMatch(/search_tools/);
  });

  it('offers the same to a 2026-07-28 client, its tools without execution', async () => {
    const client = await client2026(wide);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['status_show', 'search_tools']);
    expect(tools.some((t) => 'execution' in t)).toBe(false);
    const searched = await client.callTool({ name: 'search_tools', arguments: { query: NEED, limit: 3 } });
    const found = searched.structuredContent as unknown as FoundTools;
    expect(found.tools[0]).toMatchObject({ name: 'temperature_convert', inputSchema: { type: 'object' } });
    expect(found.tools.length).toBeLessThanOrEqual(3);
    expect(JSON.stringify(searched)).not.toMatch(HIDDEN);
    expect(found.tools.some((t) => 'execution' in t)).toBe(false);
    const called = await client.callTool({ name: 'temperature_convert', arguments: { id: '7' } });
    expect(called).toMatchObject({ content: [{ type: 'text', text: expect.stringContaining('ran for 7') }] });
    const narrowList = await (await client2026(narrow)).listTools();
    expect(narrowList.tools.map((t) => t.name)).toEqual(['contact_lookup', 'invoice_send', 'note_add']);
  });

  it('audits each search as the dispatcher audits tool_search: who, which session, the query digest, refusals too', async () => {
    const events: CallEvent[] = [];
    const stop = watchCalls(nc, (e) => events.push(e));
    await nc.flush();
    try {
      const query = 'read the contents of a file';
      const modern = `${query} (2026-07-28)`;
      const searched = await (await client2025(wide)).callTool({ name: 'search_tools', arguments: { query } });
      expect((searched.structuredContent as unknown as FoundTools).tools[0]?.name).toBe('file_read');
      const found = await (await client2026(wide)).callTool({
        name: 'search_tools',
        arguments: { query: modern, limit: 2 },
      });
      expect((found.structuredContent as unknown as FoundTools).tools).toHaveLength(2);
      const bad = await (await client2025(wide)).callTool({ name: 'search_tools', arguments: { query: '' } });
      expect(bad.isError).toBe(true);
      const ofQuery = (args: Record<string, unknown>) =>
        eventually(() => events.find((e) => e.argumentsDigest === sha256Hex(JSON.stringify(args))) ?? false);
      const audited = await ofQuery({ query });
      expect(audited).toMatchObject({
        name: 'tool_search',
        target: 'system.tools',
        op: '$search',
        principal: 'agent:ada',
        session: 's-wide',
        outcome: 'ok',
        attempts: 1,
      });
      // The call's id in the trail is the bridge session's, the JSON-RPC id kept in it.
      expect(audited.callId).toMatch(/^mcp-[0-9a-f]{12}-\d+$/);
      expect(await ofQuery({ query: modern, limit: 2 })).toMatchObject({
        name: 'tool_search',
        principal: 'agent:ada',
        outcome: 'ok',
      });
      expect(await ofQuery({ query: '' })).toMatchObject({
        name: 'tool_search',
        principal: 'agent:ada',
        outcome: 'error',
        code: 'bad_request',
      });
      // The query itself is in no event: only its digest.
      expect(JSON.stringify(events)).not.toContain(query);
    } finally {
      stop();
    }
  });

  it("answers a search whose reply passes the dispatcher's cap in full, the call audited once", async () => {
    const events: CallEvent[] = [];
    const stop = watchCalls(nc, (e) => events.push(e));
    await nc.flush();
    try {
      const args = { query: 'read a chapter of the operations manual', limit: 50 };
      const searched = await (await client2025(long)).callTool({ name: 'search_tools', arguments: args });
      expect(searched.isError).toBeFalsy();
      const found = searched.structuredContent as unknown as FoundTools;
      expect(found.total).toBe(40);
      expect(found.tools).toHaveLength(40);
      expect(JSON.stringify(found).length).toBeGreaterThan(65_536);
      const digest = sha256Hex(JSON.stringify(args));
      await eventually(() => events.some((e) => e.argumentsDigest === digest));
      expect(events.filter((e) => e.argumentsDigest === digest)).toMatchObject([
        { name: 'tool_search', session: 's-long', outcome: 'ok' },
      ]);
    } finally {
      stop();
    }
  });

  it('takes its threshold from MATRIX_MCP_SEARCH_THRESHOLD and its kept tools from --search-keep on stdio', async () => {
    const url = sharedNatsUrl();
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [CLI_MAIN, 'mcp', '--profile', 'agent', '--refs', 'crm', '--search-keep', 'note_add'],
      env: {
        ...process.env,
        ...sharedNatsEnv(url),
        NATS_URL: url,
        MATRIX_GRANT: narrow,
        MATRIX_MCP_SEARCH_THRESHOLD: '2',
      } as Record<string, string>,
      stderr: 'pipe',
    });
    const client = new Client({ name: 'search-stdio', version: '1.0.0' });
    open.push(client);
    await client.connect(transport);
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['note_add', 'search_tools']);
    const searched = await client.callTool({ name: 'search_tools', arguments: { query: 'send a bill to a customer' } });
    expect((searched.structuredContent as unknown as FoundTools).tools[0]?.name).toBe('invoice_send');
  }, 30_000);

  it('refuses search_tools as a task with -32601, as MCP says for a tool whose taskSupport is forbidden', async () => {
    const raw = await startRawBridge(sharedNatsUrl(), [
      '--profile',
      'agent',
      '--grant',
      narrow,
      '--search-threshold',
      '2',
    ]);
    try {
      await raw.request(1, 'initialize', initializeParams);
      raw.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      const asTask = await raw.request(2, 'tools/call', { name: 'search_tools', arguments: { query: 'x' }, task: {} });
      expect(asTask.error).toEqual({
        code: -32601,
        message: '"search_tools" does not run as a task (taskSupport forbidden)',
      });
      const plain = await raw.request(3, 'tools/call', {
        name: 'search_tools',
        arguments: { query: 'write a note down' },
      });
      expect((plain.result?.structuredContent as FoundTools | undefined)?.tools[0]?.name).toBe('note_add');
    } finally {
      raw.child.stdin.end();
      await raw.exited;
    }
  }, 30_000);

  it('refuses a threshold that is not a whole number as a usage error (exit 2)', async () => {
    const url = sharedNatsUrl();
    const exit = await new Promise<number | null>((resolve) => {
      const child = execFile(
        process.execPath,
        [CLI_MAIN, 'mcp', '--profile', 'agent', '--search-threshold', 'many'],
        { env: { ...process.env, ...sharedNatsEnv(url), NATS_URL: url, MATRIX_GRANT: narrow } },
        (_err, _stdout, stderr) => {
          expect(stderr).toMatch(/--search-threshold must be a whole number of tools \(0 or more\), got "many"/);
          resolve(child.exitCode);
        },
      );
    });
    expect(exit).toBe(2);
  }, 30_000);
});
