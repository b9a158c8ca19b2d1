/**
 * docs/protocol.md against the code: every op, header, error code and audit field named in its
 * tables exists in the code, and every one in the code is named there. The mounts are built
 * (not started) on a real connection to read their ops.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvalsMount } from '../../src/approvals/system-approvals.js';
import { ErrorCode, errorFromWire, errorStatus } from '../../src/bus/errors.js';
import { Header } from '../../src/bus/headers.js';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import { ToolErrorCode } from '../../src/dispatcher/types.js';
import { agentsMount } from '../../src/reference-mounts/agents.js';
import { packagesMount } from '../../src/reference-mounts/packages.js';
import { sessionsMount } from '../../src/reference-mounts/sessions.js';
import { tracesMount } from '../../src/reference-mounts/traces.js';
import { registryMount } from '../../src/registry/system-tools.js';
import { TaskRunner } from '../../src/tasks/runner.js';
import { TaskStore } from '../../src/tasks/store.js';
import { tasksMount } from '../../src/tasks/system-tasks.js';
import { testConnection } from '../harness/bus.js';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const doc = read('docs/protocol.md');

/** The markdown tables of a text: header cells and rows of cells. */
function tables(text: string): Array<{ header: string[]; rows: string[][] }> {
  const found: Array<{ header: string[]; rows: string[][] }> = [];
  const cells = (line: string) =>
    line
      .trim()
      .replace(/^\||\|$/g, '')
      .split(/(?<!\\)\|/)
      .map((c) => c.trim());
  const lines = text.split('\n');
  for (let i = 0; i + 1 < lines.length; i++) {
    if (!lines[i]?.trim().startsWith('|') || !/^\|[\s|:-]+\|$/.test(lines[i + 1]?.trim() ?? '')) continue;
    const table = { header: cells(lines[i] as string), rows: [] as string[][] };
    for (i += 2; lines[i]?.trim().startsWith('|'); i++) table.rows.push(cells(lines[i] as string));
    found.push(table);
  }
  return found;
}

const spans = (text: string) => [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1] as string);
const firstSpan = (cell: string | undefined) => spans(cell ?? '')[0] ?? '';
const tableOf = (first: string) => {
  const table = tables(doc).find((t) => t.header[0] === first);
  if (table === undefined) throw new Error(`docs/protocol.md has no table headed "${first}"`);
  return table;
};
const sorted = (values: Iterable<string>) => [...new Set(values)].sort();

describe('docs/protocol.md, held to the code', () => {
  let nc: NatsConnection;
  const mounts: Mount[] = [];
  const bucket = `test-doc-sessions-${process.pid}`;
  const tasksBucket = `test-doc-tasks-${process.pid}`;
  let runner: TaskRunner;
  let closeDispatcher = () => {};

  beforeAll(async () => {
    nc = await testConnection();
    const traces = tracesMount(nc);
    traces.stop();
    mounts.push(
      registryMount(nc),
      dispatcherMount(nc),
      agentsMount(nc),
      traces.mount,
      packagesMount(nc),
      await approvalsMount(nc, { bucket: `test-approvals-doc-${process.pid}` }),
    );
    mounts.push(await sessionsMount(nc, { bucket }));
    const dispatcher = new Dispatcher(nc);
    runner = new TaskRunner(dispatcher, await TaskStore.open(nc, { bucket: tasksBucket }));
    closeDispatcher = () => dispatcher.close();
    mounts.push(tasksMount(nc, { runner }));
  });
  afterAll(async () => {
    closeDispatcher();
    await (await new Kvm(nc).open(bucket)).destroy();
    await (await new Kvm(nc).open(tasksBucket)).destroy();
  });

  it('names every op of system.tools, system.dispatcher and the reference mounts, and no other', () => {
    const inCode = sorted(mounts.flatMap((m) => m.endpointStats().map((e) => e.subject)));
    const inDoc = sorted(spans(doc).filter((s) => /^system\.[a-z]+\.\$[A-Za-z][A-Za-z0-9_]*$/.test(s)));
    expect(
      inCode.filter((op) => !inDoc.includes(op)),
      'ops the code has that the doc does not name',
    ).toEqual([]);
    expect(
      inDoc.filter((op) => !inCode.includes(op)),
      'ops the doc names that the code does not have',
    ).toEqual([]);
  });

  it('lists every header the code reads or writes; a header marked pending is not in the code yet', () => {
    const rows = tableOf('header').rows.map((r) => ({
      name: firstSpan(r[0]),
      pending: (r[1] ?? '').startsWith('_pending_'),
    }));
    const inCode: string[] = Object.values(Header);
    expect(
      sorted(inCode.filter((h) => !rows.some((r) => r.name === h))),
      'headers the code has that the doc does not list',
    ).toEqual([]);
    const unknown = rows.filter((r) => !r.pending && !inCode.includes(r.name)).map((r) => r.name);
    expect(unknown, 'headers the doc lists that the code does not have').toEqual([]);
    const arrived = rows.filter((r) => r.pending && inCode.includes(r.name)).map((r) => r.name);
    expect(arrived, 'headers now in the code: drop their _pending_ mark in docs/protocol.md').toEqual([]);
  });

  it('gives every error code with its status number and class, and the tool-result-only codes', () => {
    const rows = tableOf('code').rows.map((r) => ({
      code: firstSpan(r[0]),
      status: r[1] ?? '',
      className: firstSpan(r[2]),
    }));
    const wire = rows.filter((r) => /^\d+$/.test(r.status));
    expect(Object.fromEntries(wire.map((r) => [r.code, Number(r.status)]))).toEqual(errorStatus);
    for (const r of wire) expect(r.className, r.code).toBe(errorFromWire(r.code as ErrorCode, 'x').name);
    const toolOnly = Object.values(ToolErrorCode).filter((c) => !(Object.values(ErrorCode) as string[]).includes(c));
    expect(sorted(rows.filter((r) => !/^\d+$/.test(r.status)).map((r) => r.code))).toEqual(sorted(toolOnly));
  });

  it('describes every field of an audit event, as contracts/call.event.json has them', () => {
    const schema = JSON.parse(read('contracts/call.event.json')) as {
      $defs: { callEvent: { properties: Record<string, unknown> } };
    };
    expect(sorted(tableOf('field').rows.map((r) => firstSpan(r[0])))).toEqual(
      sorted(Object.keys(schema.$defs.callEvent.properties)),
    );
  });
});

describe('the README and the docs pages', () => {
  const readme = read('README.md');
  const pages = readdirSync(new URL('../../docs/', import.meta.url))
    .filter((f) => f.endsWith('.md'))
    .map((f) => read(`docs/${f}`));

  it('links the protocol document of the repository', () => {
    expect(readme).toContain('](docs/protocol.md)');
    expect(readme).not.toMatch(/The wire contract is `PROTOCOL\.md`/);
  });

  it("runs this project's own CLI in every Claude Desktop snippet, never an npm package by name", () => {
    // docs/mcp-host.md's snippets are the host's own mcpServers files: MCP servers it runs, npx and all.
    const bridgePages = [readme, ...pages.filter((text) => !text.startsWith('# MCP servers as mounts'))];
    const snippets = bridgePages.flatMap((text) =>
      [...text.matchAll(/```json\n(\{\s*"mcpServers"[\s\S]*?)\n```/g)].map((m) => m[1] as string),
    );
    expect(/```json\n\{\s*"mcpServers"/.test(readme), 'the README shows one').toBe(true);
    for (const snippet of snippets) {
      const config = JSON.parse(snippet) as { mcpServers: Record<string, { command: string; args: string[] }> };
      for (const server of Object.values(config.mcpServers)) {
        expect(server.command).toBe('node');
        expect(server.args[0]).toMatch(/^\/.*\/matrix-tool-registry\/dist\/src\/cli\/main\.js$/);
        expect(server.args.slice(1, 2)).toEqual(['mcp']);
      }
    }
    for (const text of bridgePages) expect(text).not.toMatch(/"command":\s*"npx"/);
    for (const text of [readme, ...pages]) expect(text).not.toMatch(/npx -y matrix-tool|"matrix-tool-registry"/);
  });
});
