/**
 * The verbs that talk to a running system — list, resolve, search, call, introspect, register,
 * unregister, watch — each `(client, args, out)`, and `addToolCommands`, which declares them.
 */
import { readFileSync } from 'node:fs';
import { type Command, Option } from 'commander';
import { watchCalls } from '../audit/log.js';
import { BusClient, ReplyMode } from '../bus/client.js';
import { newTraceparent, traceIdOf } from '../bus/headers.js';
import { Mounts, mountReplyPrefix } from '../bus/subjects.js';
import type { ToolResult } from '../dispatcher/types.js';
import type { MountDescription } from '../reference-mounts/agents.js';
import { watchRegistry } from '../registry/events.js';
import type {
  IntrospectReply,
  ListReply,
  RegisterReply,
  ResolvedToolContext,
  ToolContextSpec,
} from '../registry/types.js';
import type { Task } from '../tasks/types.js';
import { wholeNumber, withConnection } from './config.js';
import { ExitCode, json, jsonFlag, type Output, table, UsageError } from './output.js';
import { revoke } from './revoke.js';
import { interrupted, verbAction, verbActionOnGrant } from './run.js';
import { search } from './search.js';
import { grantContext, type SessionFlags, sessionRequest, withSession } from './session-flags.js';
import { followTask } from './tasks.js';

/** How long a registry query waits, in ms. */
const QUERY_TIMEOUT_MS = 5_000;
/** How long a registry write waits, in ms (a KV write, replicated). */
const WRITE_TIMEOUT_MS = 10_000;

/** `list`: one table of every context (all pages), or JSON. */
export async function list(client: BusClient, args: { tool?: string; json?: boolean }, out: Output): Promise<number> {
  const contexts: ListReply['contexts'] = [];
  let cursor: string | undefined;
  let revision = 0;
  do {
    const page = await client.request<ListReply>(
      Mounts.Tools,
      '$list',
      { limit: 500, ...(cursor ? { cursor } : {}), ...(args.tool ? { tool: args.tool } : {}) },
      { timeoutMs: QUERY_TIMEOUT_MS },
    );
    contexts.push(...page.contexts);
    cursor = page.nextCursor;
    revision = page.revision;
  } while (cursor !== undefined);
  if (args.json) out.print(json({ contexts, revision }));
  else {
    out.print(
      table(
        ['KEY', 'SOURCE', 'REV', 'TOOLS'],
        contexts.map((c) => [c.key, c.source, String(c.revision), c.tools.join(', ')]),
      ),
    );
    out.print(`(${contexts.length} contexts, registry revision ${revision})`);
  }
  return ExitCode.Ok;
}

/** `resolve`: the resolved tools as a table (or the whole reply as JSON). */
export async function resolve(
  client: BusClient,
  args: SessionFlags & { json?: boolean },
  out: Output,
): Promise<number> {
  const reply = await client.request<ResolvedToolContext>(Mounts.Tools, '$resolve', sessionRequest(args), {
    timeoutMs: QUERY_TIMEOUT_MS,
    ...grantContext(args),
  });
  if (args.json) {
    out.print(json(reply));
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
  out.print(
    `contexts: ${reply.contexts.join(', ') || '(none)'}   timeout ${reply.timeoutMs} ms   revision ${reply.revision}   digest ${reply.digest.slice(0, 16)}`,
  );
  out.print(table(['TOOL', 'CONTEXT', 'TARGET', 'GATE', 'RESULT', 'TIMEOUT'], rows));
  for (const d of reply.diagnostics) out.print(`${d.level}: ${d.message}`);
  return ExitCode.Ok;
}

/** What `call` takes: the tool, the session flags and the call's own. */
export interface CallArgs extends SessionFlags {
  tool: string;
  args?: string;
  json?: boolean;
  session?: string;
  principal?: string;
  traceparent?: string;
  timeout?: string;
  /** Run it as a task: print its id, follow it with a progress line on stderr, then its result. */
  task?: boolean;
}

/** `call`: one tool call through `system.dispatcher`; prints the content, or the whole result as JSON. */
export async function call(client: BusClient, args: CallArgs, out: Output): Promise<number> {
  const toolArgs = args.args === undefined ? {} : jsonFlag('--args', args.args);
  if (toolArgs === null || typeof toolArgs !== 'object' || Array.isArray(toolArgs))
    throw new UsageError('--args must be a JSON object');
  const traceparent = args.traceparent ?? newTraceparent();
  const ctx = {
    traceparent,
    timeoutMs: wholeNumber('--timeout', args.timeout, 1) ?? 65_000,
    ...(args.session ? { session: args.session } : {}),
    ...(args.principal ? { principal: args.principal } : {}),
    ...grantContext(args),
  };
  const body = {
    session: sessionRequest(args),
    call: { id: `cli-${Date.now().toString(36)}`, name: args.tool, arguments: toolArgs },
  };
  if (args.task) {
    const reply = await client.request<ToolResult | { task: Task }>(
      Mounts.Dispatcher,
      '$call',
      { ...body, task: {} },
      ctx,
    );
    if ('task' in reply) {
      out.print(reply.task.taskId);
      return followTask(client, reply.task, ctx, out, args.json);
    }
    out.print(args.json ? json(reply) : reply.content);
    return ExitCode.Failed;
  }
  const result = await client.request<ToolResult>(Mounts.Dispatcher, '$call', body, ctx);
  out.note(
    `trace ${traceIdOf(traceparent)}  ${result.isError ? `error ${result.error?.code}` : 'ok'}  ${result.durationMs.toFixed(1)} ms`,
  );
  out.print(args.json ? json(result) : result.content);
  return result.isError ? ExitCode.Failed : ExitCode.Ok;
}

/** `introspect [mount]`: the live mounts (via system.agents), or one mount's own `$introspect`. */
export async function introspect(
  client: BusClient,
  args: { mount?: string; json?: boolean },
  out: Output,
): Promise<number> {
  if (args.mount !== undefined) {
    // Any mount answers: on an inbox its NATS user may publish onto (deploy/nats.conf).
    const toMount = new BusClient(client.nc, {
      inboxPrefix: mountReplyPrefix(client.nc),
      replies: ReplyMode.PerRequest,
    });
    const reply = await toMount
      .request<IntrospectReply>(args.mount, '$introspect', {}, { timeoutMs: QUERY_TIMEOUT_MS })
      .finally(() => toMount.close());
    if (args.json) out.print(json(reply));
    else {
      out.print(`${reply.mount} ${reply.version} (instance ${reply.instance.id})`);
      out.print(
        table(
          ['OP', 'DESCRIPTION'],
          reply.ops.map((o) => [o.op, o.description]),
        ),
      );
    }
    return ExitCode.Ok;
  }
  const reply = await client.request<{ mounts: MountDescription[] }>(
    Mounts.Agents,
    '$introspect',
    {},
    { timeoutMs: QUERY_TIMEOUT_MS },
  );
  const rows = reply.mounts.map((m) => [
    m.mount,
    String(m.instances),
    m.version ?? '',
    m.ops.map((o) => o.op).join(' '),
  ]);
  out.print(args.json ? json(reply) : table(['MOUNT', 'INSTANCES', 'VERSION', 'OPS'], rows));
  return ExitCode.Ok;
}

/** `register <file>`: a spec, or an array of specs, from a JSON file. */
export async function register(
  client: BusClient,
  args: { file: string; expectedRevision?: string },
  out: Output,
): Promise<number> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(args.file, 'utf8'));
  } catch (err) {
    throw new UsageError(`cannot read ${args.file}: ${(err as Error).message}`);
  }
  const expectedRevision = wholeNumber('--expected-revision', args.expectedRevision, 0);
  for (const spec of (Array.isArray(parsed) ? parsed : [parsed]) as ToolContextSpec[]) {
    const body = expectedRevision === undefined ? { spec } : { spec, expectedRevision };
    const reply = await client.request<RegisterReply>(Mounts.Tools, '$register', body, { timeoutMs: WRITE_TIMEOUT_MS });
    out.print(`registered ${reply.key} at revision ${reply.revision}`);
  }
  return ExitCode.Ok;
}

/** `unregister <key>`. */
export async function unregister(
  client: BusClient,
  args: { key: string; expectedRevision?: string },
  out: Output,
): Promise<number> {
  const expectedRevision = wholeNumber('--expected-revision', args.expectedRevision, 0);
  const body = expectedRevision === undefined ? { key: args.key } : { key: args.key, expectedRevision };
  const reply = await client.request<RegisterReply>(Mounts.Tools, '$unregister', body, { timeoutMs: WRITE_TIMEOUT_MS });
  out.print(`unregistered ${reply.key} at revision ${reply.revision}`);
  return ExitCode.Ok;
}

/** What `watch` takes; `until` ends it (default: Ctrl-C or SIGTERM). */
export interface WatchArgs {
  calls?: boolean;
  json?: boolean;
  until?: Promise<unknown>;
}

/** `watch`: prints registry changes (and, with --calls, every tool call) until `until`. */
export async function watch(client: BusClient, args: WatchArgs, out: Output): Promise<number> {
  const print = (kind: string, event: unknown, text: string) =>
    out.print(args.json ? JSON.stringify({ kind, event }) : `${new Date().toISOString()} ${text}`);
  const stops = [watchRegistry(client.nc, (e) => print('changed', e, `${e.change} ${e.key} (revision ${e.revision})`))];
  if (args.calls) {
    stops.push(
      watchCalls(client.nc, (e) => {
        const code = e.code ? ` (${e.code})` : '';
        print(
          'call',
          e,
          `call ${e.name} → ${e.target ?? '?'} ${e.op ?? ''} ${e.outcome}${code} ${e.durationMs} ms trace ${traceIdOf(e.traceparent) ?? '-'}`,
        );
      }),
    );
  }
  await client.nc.flush();
  out.note('watching; Ctrl-C to stop');
  await (args.until ?? interrupted());
  for (const stop of stops) stop();
  return ExitCode.Ok;
}

/** Declares the verbs above, each with the connection flags. */
export function addToolCommands(program: Command): void {
  const command = (name: string, description: string) => withConnection(program.command(name).description(description));
  command('list', 'list the tool contexts')
    .option('--tool <name>', 'only contexts with this tool')
    .option('--json', 'print JSON')
    .action(verbAction(list));
  withSession(command('resolve', 'show the tools a profile gets'))
    .addOption(
      new Option('--format <format>', 'add providerTools in this format').choices([
        'matrix',
        'openai',
        'anthropic',
        'mcp',
      ]),
    )
    .option('--strict', 'with --format openai: strict-mode parameters')
    .option('--json', 'print the whole ResolvedToolContext')
    .action(verbAction(resolve));
  withSession(command('search', 'rank the tools of a session for a need').argument('<query>', 'the need, in words'))
    .option('--limit <n>', 'how many tools (1..50; default 5)')
    .option('--json', 'print the whole reply')
    .action(verbAction(search, 'query'));
  withSession(command('call', 'call a tool through system.dispatcher').argument('<tool>', 'tool name'))
    .option('-a, --args <json>', 'the arguments, a JSON object', '{}')
    .option('--session <id>', 'Matrix-Session')
    .option('--principal <id>', 'Matrix-Principal')
    .option('--traceparent <traceparent>', 'W3C traceparent (a new trace by default)')
    .option('--timeout <ms>', 'how long to wait', '65000')
    .option('--json', 'print the whole ToolResult')
    .option('--task', 'run it as a task: print its id, follow it (progress on stderr), then print its result')
    .action(verbAction(call, 'tool'));
  command('introspect', 'the live mounts, or one mount in full')
    .argument('[mount]', 'a mount, e.g. system.tools')
    .option('--json', 'print JSON')
    .action(verbAction(introspect, 'mount'));
  command('register', 'register tool contexts from a JSON file (a spec or an array)')
    .argument('<file>')
    .option('--expected-revision <n>', 'compare-and-set: 0 = only if new')
    .action(verbAction(register, 'file'));
  command('unregister', 'remove a registered tool context')
    .argument('<key>')
    .option('--expected-revision <n>', 'compare-and-set')
    .action(verbAction(unregister, 'key'));
  command('revoke', 'revoke a grant, or every grant of a principal issued until now, on every instance')
    .option('--grant <jwt|file>', 'the grant to revoke (its jti; until it would have expired)')
    .option('--jti <id>', 'the jti of the grant to revoke')
    .option('--principal <id>', 'revoke every grant of this principal (sub) issued until now')
    .option('--reason <text>', 'why (shown in the refusals it causes)')
    .option('--until <time>', 'when the revocation ends (ISO 8601; default: when the grants it names expire)')
    .action(verbActionOnGrant(revoke));
  command('watch', 'print registry changes until Ctrl-C')
    .option('--calls', 'also print every tool call')
    .option('--json', 'one JSON object per line')
    .action(verbAction(watch));
}
