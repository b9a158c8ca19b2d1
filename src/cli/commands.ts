/** The verbs that talk to a running system: list, resolve, call, introspect, register, unregister, watch. */
import { readFileSync } from 'node:fs';
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient } from '../bus/client.js';
import { newTraceparent, traceIdOf } from '../bus/context.js';
import { Mounts } from '../bus/subjects.js';
import { watchCalls } from '../dispatcher/audit.js';
import type { ToolResult } from '../dispatcher/types.js';
import { GrantedSession, loadGrant } from '../identity/granted.js';
import type { MountDescription } from '../mounts/agents.js';
import { watchRegistry } from '../registry/events.js';
import type { IntrospectReply, ListReply, RegisterReply, ResolvedToolContext, ResolveRequest, ToolContextSpec } from '../registry/types.js';
import { ExitCode, jsonFlag, table, UsageError } from './output.js';

/** Flags that pick a session (the `$resolve` request behind `resolve` and `call`). */
export interface SessionFlags {
  /** Required unless `grant` gives it. */
  profile?: string;
  /** A session grant (its text or a file), `--grant` / `MATRIX_GRANT`: sent as `Matrix-Grant`, its authority the request's. */
  grant?: string;
  worker?: string;
  refs?: string;
  skill?: string[];
  requires?: string;
  environment?: string;
  format?: string;
  onlyAvailable?: boolean;
  strict?: boolean;
}

const csv = (text: string | undefined) =>
  text === undefined
    ? undefined
    : text
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);

/** The `$resolve` request the flags describe. */
export function sessionRequest(flags: SessionFlags): ResolveRequest {
  // With a grant, its authority; flags given besides are sent too, for the service to hold against it.
  const request: ResolveRequest = flags.grant ? { ...new GrantedSession(loadGrant(flags.grant)).request } : { profile: '' };
  if (flags.profile) request.profile = flags.profile;
  if (!request.profile) throw new UsageError('--profile is required (or --grant / MATRIX_GRANT, whose profile is used)');
  if (flags.worker) request.worker = flags.worker;
  const refs = csv(flags.refs);
  if (refs) request.toolContextRefs = refs;
  if (flags.skill?.length) {
    request.skills = flags.skill.map((s) => {
      const [name, list] = s.split('=', 2);
      if (!name) throw new UsageError(`--skill takes name=ref1,ref2, got '${s}'`);
      const skillRefs = csv(list);
      return skillRefs ? { name, toolContextRefs: skillRefs } : { name };
    });
  }
  const requires = csv(flags.requires);
  if (requires) request.requires = requires;
  if (flags.environment) request.environment = jsonFlag('--environment', flags.environment) as ResolveRequest['environment'];
  if (flags.format) request.format = flags.format as ResolveRequest['format'];
  if (flags.onlyAvailable) request.onlyAvailable = true;
  if (flags.strict) request.strict = true;
  return request;
}

/** The `Matrix-Grant` header the flags ask for, if any. */
export function grantContext(flags: { grant?: string }): { grant?: string } {
  return flags.grant ? { grant: loadGrant(flags.grant) } : {};
}

/** `list`: one table of every context (all pages), or JSON. */
export async function list(nc: NatsConnection, flags: { tool?: string; json?: boolean }): Promise<number> {
  const client = new BusClient(nc, { timeoutMs: 5_000 });
  const contexts: ListReply['contexts'] = [];
  let cursor: string | undefined;
  let revision = 0;
  do {
    const page = await client.request<ListReply>(Mounts.Tools, '$list', {
      limit: 500,
      ...(cursor ? { cursor } : {}),
      ...(flags.tool ? { tool: flags.tool } : {}),
    });
    contexts.push(...page.contexts);
    cursor = page.nextCursor;
    revision = page.revision;
  } while (cursor !== undefined);
  if (flags.json) process.stdout.write(`${JSON.stringify({ contexts, revision }, null, 2)}\n`);
  else
    process.stdout.write(
      `${table(
        ['KEY', 'SOURCE', 'REV', 'TOOLS'],
        contexts.map((c) => [c.key, c.source, String(c.revision), c.tools.join(', ')]),
      )}\n(${contexts.length} contexts, registry revision ${revision})\n`,
    );
  return ExitCode.Ok;
}

/** `resolve`: the resolved tools as a table (or the whole reply as JSON). */
export async function resolve(nc: NatsConnection, flags: SessionFlags & { json?: boolean }): Promise<number> {
  const reply = await new BusClient(nc, { timeoutMs: 5_000 }).request<ResolvedToolContext>(
    Mounts.Tools,
    '$resolve',
    sessionRequest(flags),
    grantContext(flags),
  );
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(reply, null, 2)}\n`);
    return ExitCode.Ok;
  }
  const rows = reply.matrixTools.map((t) => [
    t.name,
    t.context,
    `${t.target} ${t.op}`,
    t.requiresApproval ? 'approval' : '',
    t.resultMode,
    String(t.timeoutMs ?? reply.timeoutMs),
  ]);
  for (const name of reply.sdkTools) rows.push([name, '', '(worker SDK)', '', '', '']);
  const out = [
    `contexts: ${reply.contexts.join(', ') || '(none)'}   timeout ${reply.timeoutMs} ms   revision ${reply.revision}   digest ${reply.digest.slice(0, 16)}`,
    table(['TOOL', 'CONTEXT', 'TARGET', 'GATE', 'RESULT', 'TIMEOUT'], rows),
    ...reply.diagnostics.map((d) => `${d.level}: ${d.message}`),
  ];
  process.stdout.write(`${out.join('\n')}\n`);
  return ExitCode.Ok;
}

/** `call`: one tool call through `system.dispatcher`; prints the content, or the whole result as JSON. */
export async function call(
  nc: NatsConnection,
  tool: string,
  flags: SessionFlags & { args?: string; json?: boolean; session?: string; principal?: string; traceparent?: string; timeout?: string },
): Promise<number> {
  const args = flags.args === undefined ? {} : jsonFlag('--args', flags.args);
  if (args === null || typeof args !== 'object' || Array.isArray(args)) throw new UsageError('--args must be a JSON object');
  const traceparent = flags.traceparent ?? newTraceparent();
  const ctx = {
    traceparent,
    timeoutMs: Number(flags.timeout) || 65_000,
    ...(flags.session ? { session: flags.session } : {}),
    ...(flags.principal ? { principal: flags.principal } : {}),
    ...grantContext(flags),
  };
  const result = await new BusClient(nc).request<ToolResult>(
    Mounts.Dispatcher,
    '$call',
    { session: sessionRequest(flags), call: { id: `cli-${Date.now().toString(36)}`, name: tool, arguments: args } },
    ctx,
  );
  process.stderr.write(`trace ${traceIdOf(traceparent)}  ${result.isError ? `error ${result.error?.code}` : 'ok'}  ${result.durationMs.toFixed(1)} ms\n`);
  process.stdout.write(flags.json ? `${JSON.stringify(result, null, 2)}\n` : `${result.content}\n`);
  return result.isError ? ExitCode.Failed : ExitCode.Ok;
}

/** `introspect [mount]`: the live mounts (via system.agents), or one mount's own `$introspect`. */
export async function introspect(nc: NatsConnection, mount: string | undefined, flags: { json?: boolean }): Promise<number> {
  const client = new BusClient(nc, { timeoutMs: 5_000 });
  if (mount !== undefined) {
    const reply = await client.request<IntrospectReply>(mount, '$introspect', {});
    if (flags.json) process.stdout.write(`${JSON.stringify(reply, null, 2)}\n`);
    else
      process.stdout.write(
        `${reply.mount} ${reply.version} (instance ${reply.instance.id})\n${table(
          ['OP', 'DESCRIPTION'],
          reply.ops.map((o) => [o.op, o.description]),
        )}\n`,
      );
    return ExitCode.Ok;
  }
  const reply = await client.request<{ mounts: MountDescription[] }>(Mounts.Agents, '$introspect', {});
  if (flags.json) process.stdout.write(`${JSON.stringify(reply, null, 2)}\n`);
  else
    process.stdout.write(
      `${table(
        ['MOUNT', 'INSTANCES', 'VERSION', 'OPS'],
        reply.mounts.map((m) => [m.mount, String(m.instances), m.version ?? '', m.ops.map((o) => o.op).join(' ')]),
      )}\n`,
    );
  return ExitCode.Ok;
}

/** `register <file>`: a spec, or an array of specs, from a JSON file. */
export async function register(nc: NatsConnection, file: string, flags: { expectedRevision?: string }): Promise<number> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
  const specs = (Array.isArray(parsed) ? parsed : [parsed]) as ToolContextSpec[];
  const client = new BusClient(nc, { timeoutMs: 10_000 });
  for (const spec of specs) {
    const body = flags.expectedRevision === undefined ? { spec } : { spec, expectedRevision: Number(flags.expectedRevision) };
    const reply = await client.request<RegisterReply>(Mounts.Tools, '$register', body);
    process.stdout.write(`registered ${reply.key} at revision ${reply.revision}\n`);
  }
  return ExitCode.Ok;
}

/** `unregister <key>`. */
export async function unregister(nc: NatsConnection, key: string, flags: { expectedRevision?: string }): Promise<number> {
  const body = flags.expectedRevision === undefined ? { key } : { key, expectedRevision: Number(flags.expectedRevision) };
  const reply = await new BusClient(nc, { timeoutMs: 10_000 }).request<RegisterReply>(Mounts.Tools, '$unregister', body);
  process.stdout.write(`unregistered ${reply.key} at revision ${reply.revision}\n`);
  return ExitCode.Ok;
}

/** `watch`: prints registry changes (and, with --calls, every tool call) until Ctrl-C. */
export async function watch(nc: NatsConnection, flags: { calls?: boolean; json?: boolean }): Promise<number> {
  const print = (kind: string, event: unknown, text: string) =>
    process.stdout.write(flags.json ? `${JSON.stringify({ kind, event })}\n` : `${new Date().toISOString()} ${text}\n`);
  const stops = [watchRegistry(nc, (e) => print('changed', e, `${e.change} ${e.key} (revision ${e.revision})`))];
  if (flags.calls) {
    stops.push(
      watchCalls(nc, (e) =>
        print(
          'call',
          e,
          `call ${e.name} → ${e.target ?? '?'} ${e.op ?? ''} ${e.outcome}${e.code ? ` (${e.code})` : ''} ${e.durationMs} ms trace ${traceIdOf(e.traceparent) ?? '-'}`,
        ),
      ),
    );
  }
  await nc.flush();
  process.stderr.write('watching; Ctrl-C to stop\n');
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  for (const stop of stops) stop();
  return ExitCode.Ok;
}
