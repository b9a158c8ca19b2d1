/**
 * `check <mount>`: a conformance check of one mount against the bus protocol, for authors of
 * mounts in any language. It asks what a client of the protocol relies on — discovery,
 * `$introspect`, MessagePack and JSON requests, the error model, `Matrix-Deadline` — prints
 * what holds and what does not, and exits 1 on a miss.
 */
import { decode } from '@msgpack/msgpack';
import { createInbox, type Msg, type NatsConnection, headers as natsHeaders, nuid } from '@nats-io/nats-core';
import type { Command } from 'commander';
import type { BusClient } from '../bus/client.js';
import { encodeBody, JSON_CONTENT_TYPE } from '../bus/codec.js';
import { Header } from '../bus/context.js';
import { discoverService, type Verb } from '../bus/discovery.js';
import { ErrorCode, errorStatus } from '../bus/errors.js';
import { mountReplyPrefix, opSubject, serviceName } from '../bus/subjects.js';
import { describeViolations } from '../contracts/compiler.js';
import { contracts, SchemaId } from '../contracts/schemas.js';
import { withConnection } from './config.js';
import { ExitCode, jsonFlag, type Output, table, UsageError } from './output.js';
import { verbAction } from './run.js';

/** One check: what was asked, whether the mount did what the protocol says, and what it did. */
export interface CheckOutcome {
  check: string;
  ok: boolean;
  detail: string;
}

/** How to check a mount. */
export interface CheckOptions {
  /** The op the encoding, error and deadline checks ask (it runs twice: one that changes nothing); default `$introspect`. */
  op?: string;
  /** Its request body; default `{}`. */
  args?: Record<string, unknown>;
  /** Longest wait for each answer, in ms; default 2000. */
  timeoutMs?: number;
}

/** An answer as it came: status and message of the NATS services error headers, content type, body. */
interface Answer {
  status: number | undefined;
  message: string;
  contentType: string | undefined;
  data: Uint8Array;
}

/** Never valid MessagePack (0xc1 is the one unused byte), nor JSON. */
const UNDECODABLE = Uint8Array.of(0xc1);
const ADR32 = 'io.nats.micro.v1';
const JSON_HEADER = { [Header.ContentType]: JSON_CONTENT_TYPE };

/** Runs every check against `mount`, in order, and returns their outcomes. */
export async function checkConformance(
  nc: NatsConnection,
  mount: string,
  options: CheckOptions = {},
): Promise<CheckOutcome[]> {
  const timeoutMs = options.timeoutMs ?? 2_000;
  const probe = { op: options.op ?? '$introspect', args: options.args ?? {} };
  const ask = (subject: string, data: Uint8Array, h: Record<string, string> = {}) =>
    request(nc, subject, data, h, timeoutMs);
  const discovery = await checkDiscovery(nc, mount, timeoutMs);
  const introspect = checkIntrospect(await ask(opSubject(mount, '$introspect'), encodeBody({})), mount);
  const probeSubject = opSubject(mount, probe.op);
  return [
    ...discovery.outcomes,
    introspect.outcome,
    checkEndpointsPerOp(discovery.ops, introspect.ops),
    checkMsgPack(await ask(probeSubject, encodeBody(probe.args)), probeSubject),
    checkJson(await ask(probeSubject, encodeBody(probe.args, 'json'), JSON_HEADER), probeSubject),
    checkError(
      'error model: unknown op',
      await ask(opSubject(mount, `$noSuchOp${nuid.next()}`), encodeBody({})),
      ErrorCode.NotFound,
    ),
    checkError('error model: undecodable body', await ask(probeSubject, UNDECODABLE), ErrorCode.BadRequest),
    // In JSON, which every mount reads: a mount that reads nothing else still meets the deadline check.
    checkError(
      'past Matrix-Deadline',
      await ask(probeSubject, encodeBody(probe.args, 'json'), {
        ...JSON_HEADER,
        [Header.Deadline]: String(Date.now() - 60_000),
      }),
      ErrorCode.Timeout,
    ),
  ];
}

async function request(
  nc: NatsConnection,
  subject: string,
  data: Uint8Array,
  h: Record<string, string>,
  timeoutMs: number,
): Promise<Answer | string> {
  const hdrs = natsHeaders();
  for (const [name, value] of Object.entries(h)) hdrs.set(name, value);
  let msg: Msg;
  try {
    // On an inbox a mount's NATS user may answer onto.
    msg = await nc.request(subject, data, {
      timeout: timeoutMs,
      headers: hdrs,
      noMux: true,
      reply: createInbox(mountReplyPrefix(nc)),
    });
  } catch (err) {
    const message = (err as Error).message;
    return /no responders/i.test(message) || /503/.test(message)
      ? `no responders on ${subject}`
      : `no answer from ${subject} (${message})`;
  }
  const status = msg.headers?.get(Header.ServiceErrorCode);
  return {
    status: status ? Number(status) : undefined,
    message: msg.headers?.get(Header.ServiceError) ?? '',
    contentType: msg.headers?.get(Header.ContentType) || undefined,
    data: msg.data,
  };
}

/** `$SRV.PING|INFO|STATS` by the mount's service name: answered, ADR-32-shaped, one endpoint per op. */
async function checkDiscovery(
  nc: NatsConnection,
  mount: string,
  waitMs: number,
): Promise<{ outcomes: CheckOutcome[]; ops: string[] | undefined }> {
  const service = serviceName(mount);
  const gather = (verb: Verb) =>
    discoverService<{ name: string } & Record<string, unknown>>(nc, verb, service, Math.min(waitMs, 500));
  const [pings, infos, stats] = await Promise.all([gather('PING'), gather('INFO'), gather('STATS')]);
  const typed = (answers: Array<Record<string, unknown>>, verb: string, kind: string): CheckOutcome => {
    const check = `discovery: $SRV.${verb}.${service}`;
    if (answers.length === 0) return { check, ok: false, detail: 'nobody answered' };
    const bad = answers.filter((a) => a.type !== `${ADR32}.${kind}` || a.name !== service);
    if (bad.length > 0)
      return {
        check,
        ok: false,
        detail: `answers must say type ${ADR32}.${kind} and name ${service}; got ${JSON.stringify(bad[0])}`,
      };
    return { check, ok: true, detail: `${answers.length} instance(s) answered` };
  };
  const info = typed(infos, 'INFO', 'info_response');
  const endpoints = info.ok ? endpointOps(infos, mount) : undefined;
  if (endpoints?.problem) Object.assign(info, { ok: false, detail: endpoints.problem });
  else if (endpoints) info.detail += `; endpoints ${endpoints.ops.join(' ')}`;
  return {
    outcomes: [typed(pings, 'PING', 'ping_response'), info, typed(stats, 'STATS', 'stats_response')],
    ops: endpoints?.ops,
  };
}

/** The ops the INFO answers' endpoints serve, or what is wrong with them. */
function endpointOps(infos: Array<Record<string, unknown>>, mount: string): { ops: string[]; problem?: string } {
  const ops = new Set<string>();
  for (const info of infos) {
    const endpoints = Array.isArray(info.endpoints) ? (info.endpoints as Array<{ subject?: unknown }>) : [];
    if (endpoints.length === 0) return { ops: [], problem: `instance ${String(info.id)} lists no endpoints` };
    for (const e of endpoints) {
      const subject = String(e.subject);
      const op = subject.startsWith(`${mount}.`) ? subject.slice(mount.length + 1) : undefined;
      if (op === undefined || op.includes('.'))
        return { ops: [], problem: `endpoint subject ${subject} is not <mount>.<op> (${mount}.<op>)` };
      ops.add(op);
    }
  }
  return { ops: [...ops].sort() };
}

function checkIntrospect(answer: Answer | string, mount: string): { outcome: CheckOutcome; ops: string[] | undefined } {
  const check = '$introspect';
  const read = success(answer, 'msgpack');
  if (typeof read === 'string') return { outcome: { check, ok: false, detail: read }, ops: undefined };
  // The fields every mount's reply has are checked; a mount may say more (system.tools its revision, system.agents the live mounts).
  const known = Object.keys((contracts().schema(SchemaId.IntrospectReply).properties ?? {}) as Record<string, unknown>);
  const violations = contracts().check(SchemaId.IntrospectReply)(
    Object.fromEntries(Object.entries(read).filter(([k]) => known.includes(k))),
  );
  if (violations !== undefined) {
    return {
      outcome: {
        check,
        ok: false,
        detail: `reply breaks the IntrospectReply contract: ${describeViolations(violations)}`,
      },
      ops: undefined,
    };
  }
  const reply = read as { mount: string; ops: Array<{ op: string }> };
  if (reply.mount !== mount)
    return { outcome: { check, ok: false, detail: `reply names mount ${reply.mount}, not ${mount}` }, ops: undefined };
  const ops = reply.ops.map((o) => o.op).sort();
  return { outcome: { check, ok: true, detail: `${ops.length} ops: ${ops.join(' ')}` }, ops };
}

function checkEndpointsPerOp(endpoints: string[] | undefined, ops: string[] | undefined): CheckOutcome {
  const check = 'discovery: one endpoint per op';
  if (endpoints === undefined) return { check, ok: false, detail: 'no endpoints discovered' };
  if (ops === undefined) return { check, ok: false, detail: 'no $introspect to say what the ops are' };
  const missing = ops.filter((op) => !endpoints.includes(op));
  const extra = endpoints.filter((op) => !ops.includes(op));
  if (missing.length === 0 && extra.length === 0)
    return { check, ok: true, detail: `${ops.length} endpoints, ${ops.length} ops` };
  return {
    check,
    ok: false,
    detail:
      `${missing.length ? `ops without an endpoint: ${missing.join(' ')}` : ''}${extra.length ? ` endpoints that are no op: ${extra.join(' ')}` : ''}`.trim(),
  };
}

function checkMsgPack(answer: Answer | string, subject: string): CheckOutcome {
  const check = 'MessagePack request';
  if (typeof answer !== 'string' && answer.contentType?.startsWith(JSON_CONTENT_TYPE)) {
    return { check, ok: false, detail: `${subject} answered a MessagePack request with ${answer.contentType}` };
  }
  const read = success(answer, 'msgpack');
  return typeof read === 'string'
    ? { check, ok: false, detail: read }
    : { check, ok: true, detail: `${subject} answered a MessagePack map` };
}

function checkJson(answer: Answer | string, subject: string): CheckOutcome {
  const check = 'JSON request (Content-Type: application/json)';
  const read = success(answer, 'json');
  if (typeof read === 'string') return { check, ok: false, detail: read };
  if (typeof answer === 'string' || !answer.contentType?.startsWith(JSON_CONTENT_TYPE)) {
    return {
      check,
      ok: false,
      detail: `${subject} answered JSON without the header Content-Type: ${JSON_CONTENT_TYPE}`,
    };
  }
  return { check, ok: true, detail: `${subject} answered a JSON object, Content-Type: ${answer.contentType}` };
}

/** An error reply as section 4 says: both headers with the code's number, and body `{error: {code, message}}`. */
function checkError(check: string, answer: Answer | string, code: ErrorCode): CheckOutcome {
  if (typeof answer === 'string') return { check, ok: false, detail: answer };
  const want = errorStatus[code];
  if (answer.status === undefined)
    return { check, ok: false, detail: `answered without an error (want ${want} ${code})` };
  const problems: string[] = [];
  if (answer.status !== want) problems.push(`${Header.ServiceErrorCode} is ${answer.status}, want ${want}`);
  if (!answer.message) problems.push(`no ${Header.ServiceError} header`);
  const error = (decodeAny(answer) as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  if (error?.code !== code || typeof error.message !== 'string')
    problems.push(`body is not {error: {code: "${code}", message}}`);
  if (problems.length > 0) return { check, ok: false, detail: problems.join('; ') };
  return { check, ok: true, detail: `${want} ${code}: ${error?.message}` };
}

/** The body of a successful answer decoded as `encoding`, or what went wrong. */
function success(answer: Answer | string, encoding: 'msgpack' | 'json'): Record<string, unknown> | string {
  if (typeof answer === 'string') return answer;
  if (answer.status !== undefined) return `answered error ${answer.status}: ${answer.message}`;
  let value: unknown;
  try {
    value =
      encoding === 'json'
        ? JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(answer.data))
        : decode(answer.data);
  } catch (err) {
    return `reply is not ${encoding === 'json' ? 'JSON' : 'MessagePack'} (${(err as Error).message})`;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return `reply is not a map: ${JSON.stringify(value)?.slice(0, 80)}`;
  return value as Record<string, unknown>;
}

/** A body as a reader takes it (PROTOCOL section 2): by Content-Type, else MessagePack, else JSON. */
function decodeAny(answer: Answer): unknown {
  const json = () => JSON.parse(new TextDecoder().decode(answer.data));
  try {
    if (answer.contentType?.startsWith(JSON_CONTENT_TYPE)) return json();
    try {
      return decode(answer.data);
    } catch {
      return json();
    }
  } catch {
    return undefined;
  }
}

/** Declares `check <mount>` with the connection flags. */
export function addCheckCommand(program: Command): void {
  withConnection(program.command('check'))
    .description('check that a mount (yours, in any language) follows the bus protocol; exit 1 on a miss')
    .argument('<mount>', 'the mount, e.g. app.weather')
    .option(
      '--op <op>',
      'the op the encoding, error and deadline checks call (it runs twice: pick one that changes nothing)',
      '$introspect',
    )
    .option('-a, --args <json>', 'its request body, a JSON object', '{}')
    .option('--timeout <ms>', 'longest wait for each answer', '2000')
    .option('--json', 'print the outcomes as JSON')
    .action(verbAction(checkMount, 'mount'));
}

/** What `check` takes. */
export interface CheckArgs {
  mount: string;
  op?: string;
  args?: string;
  timeout?: string;
  json?: boolean;
}

/** `check <mount>`: prints each check and exits 0 when every one holds, 1 otherwise. */
export async function checkMount(client: BusClient, flags: CheckArgs, out: Output): Promise<number> {
  const { mount } = flags;
  const args = jsonFlag('--args', flags.args ?? '{}');
  if (args === null || typeof args !== 'object' || Array.isArray(args))
    throw new UsageError('--args must be a JSON object');
  const outcomes = await checkConformance(client.nc, mount, {
    op: flags.op,
    args: args as Record<string, unknown>,
    timeoutMs: Number(flags.timeout) || 2_000,
  });
  const held = outcomes.filter((o) => o.ok).length;
  if (flags.json)
    out.print(JSON.stringify({ mount, service: serviceName(mount), ok: held === outcomes.length, outcomes }, null, 2));
  else {
    const rows = outcomes.map((o) => [o.ok ? 'ok' : 'MISS', o.check, o.detail]);
    out.print(`${mount} (service ${serviceName(mount)})\n${table(['', 'CHECK', 'WHAT IT SAW'], rows)}`);
    out.print(
      `${held} of ${outcomes.length} hold${held === outcomes.length ? '' : `; ${outcomes.length - held} missed`}`,
    );
  }
  return held === outcomes.length ? ExitCode.Ok : ExitCode.Failed;
}
