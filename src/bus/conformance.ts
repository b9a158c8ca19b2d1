/**
 * The conformance check of one mount against the bus protocol (PROTOCOL sections 1–5), for
 * authors of mounts in any language: it asks what a client of the protocol relies on
 * (discovery, `$introspect`, MessagePack and JSON requests, the error model, `Matrix-Deadline`)
 * and says what holds and what does not. A reply is read as the dispatcher reads it
 * (`decodeReply`). `matrix-tools check` prints it.
 */
import { createInbox, type Msg, type NatsConnection, headers as natsHeaders, nuid } from '@nats-io/nats-core';
import { decodeBody, decodeReply, decodeUnlabelled, Encoding, encodeBody, JSON_CONTENT_TYPE } from './codec.js';
import { contracts, SchemaId } from './contracts.js';
import { discoverService, type Verb } from './discovery.js';
import { ErrorCode, errorStatus } from './errors.js';
import { Header } from './headers.js';
import { describeViolations } from './schema-compiler.js';
import { mountReplyPrefix, opSubject, serviceName } from './subjects.js';

/** One check: what was asked, whether the mount did what the protocol says, and what it did. */
export interface CheckOutcome {
  check: string;
  ok: boolean;
  detail: string;
}

/** How to check a mount. */
export interface CheckOptions {
  /**
   * The op the encoding, error and deadline checks ask (it runs twice: one that changes nothing);
   * default `$introspect`.
   */
  op?: string;
  /** Its request body; default `{}`. */
  args?: Record<string, unknown>;
  /** Longest wait for each answer, in ms; default 2000. */
  timeoutMs?: number;
  /**
   * How the tools that call the mount send their requests (their projection's `encoding`);
   * default `msgpack`. `json`: the mount is asked in JSON only and need not read MessagePack.
   */
  encoding?: Encoding;
}

/**
 * An answer as it came: status and message of the NATS services error headers, content type, body.
 */
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
const MSGPACK_CHECK = 'MessagePack request';

/** Runs every check against `mount`, in order, and returns their outcomes. */
export async function checkConformance(
  nc: NatsConnection,
  mount: string,
  options: CheckOptions = {},
): Promise<CheckOutcome[]> {
  const timeoutMs = options.timeoutMs ?? 2_000;
  const json = options.encoding === Encoding.Json;
  const args = options.args ?? {};
  const ask = (subject: string, data: Uint8Array, h: Record<string, string> = {}) =>
    request(nc, subject, data, h, timeoutMs);
  // A request in the encoding the mount's tools send.
  const askAsTools = (subject: string, body: unknown, h: Record<string, string> = {}) =>
    json ? ask(subject, encodeBody(body, 'json'), { ...JSON_HEADER, ...h }) : ask(subject, encodeBody(body), h);
  const discovery = await checkDiscovery(nc, mount, timeoutMs);
  const introspect = checkIntrospect(await askAsTools(opSubject(mount, '$introspect'), {}), mount);
  const probeSubject = opSubject(mount, servedOp(options.op ?? '$introspect', introspect.ops ?? discovery.ops ?? []));
  return [
    ...discovery.outcomes,
    introspect.outcome,
    checkEndpointsPerOp(discovery.ops, introspect.ops),
    json
      ? { check: MSGPACK_CHECK, ok: true, detail: 'not required: its tools are declared encoding json' }
      : checkMsgPack(await ask(probeSubject, encodeBody(args)), probeSubject),
    checkJson(await ask(probeSubject, encodeBody(args, 'json'), JSON_HEADER), probeSubject),
    checkError(
      'error model: unknown op',
      await askAsTools(opSubject(mount, `$noSuchOp${nuid.next()}`), {}),
      ErrorCode.NotFound,
    ),
    checkError('error model: undecodable body', await ask(probeSubject, UNDECODABLE), ErrorCode.BadRequest),
    // In JSON, which every mount reads: a mount that reads nothing else still meets the
    // deadline check.
    checkError(
      'past Matrix-Deadline',
      await ask(probeSubject, encodeBody(args, 'json'), {
        ...JSON_HEADER,
        [Header.Deadline]: String(Date.now() - 60_000),
      }),
      ErrorCode.Timeout,
    ),
  ];
}

/**
 * The op to ask: as given, or with its `$` added or dropped when only that one is served (`echo`
 * or `$echo`).
 */
function servedOp(given: string, served: readonly string[]): string {
  if (served.includes(given)) return given;
  const other = given.startsWith('$') ? given.slice(1) : `$${given}`;
  return served.includes(other) ? other : given;
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

/**
 * `$SRV.PING|INFO|STATS` by the mount's service name: answered, ADR-32-shaped, one endpoint per op.
 */
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
  const body = success(answer);
  if (typeof body === 'string') return { outcome: { check, ok: false, detail: body }, ops: undefined };
  const read = body.value;
  // The fields every mount's reply has are checked; a mount may say more (system.tools its
  // revision, system.agents the live mounts).
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
  const check = MSGPACK_CHECK;
  if (typeof answer !== 'string' && answer.contentType?.startsWith(JSON_CONTENT_TYPE)) {
    return { check, ok: false, detail: `${subject} answered a MessagePack request with ${answer.contentType}` };
  }
  const read = success(answer);
  if (typeof read === 'string') return { check, ok: false, detail: read };
  return {
    check,
    ok: true,
    detail: read.unlabelledJson ? unlabelledJson(subject) : `${subject} answered a MessagePack map`,
  };
}

function checkJson(answer: Answer | string, subject: string): CheckOutcome {
  const check = 'JSON request (Content-Type: application/json)';
  const read = success(answer);
  if (typeof read === 'string') return { check, ok: false, detail: read };
  if (read.unlabelledJson) return { check, ok: true, detail: unlabelledJson(subject) };
  if (typeof answer === 'string' || !answer.contentType?.startsWith(JSON_CONTENT_TYPE))
    return { check, ok: false, detail: `${subject} answered a JSON request with MessagePack` };
  return { check, ok: true, detail: `${subject} answered a JSON object, Content-Type: ${answer.contentType}` };
}

/**
 * The note on a JSON reply without a Content-Type: readable, as the dispatcher reads it, but
 * better labelled.
 */
function unlabelledJson(subject: string): string {
  return `${subject} answered JSON without the header Content-Type: ${JSON_CONTENT_TYPE} (read as the dispatcher reads it: MessagePack failed, then JSON; note, not a miss)`;
}

/**
 * An error reply as section 4 says: both headers with the code's number, and body `{error:
 * {code, message}}`.
 */
function checkError(check: string, answer: Answer | string, code: ErrorCode): CheckOutcome {
  if (typeof answer === 'string') return { check, ok: false, detail: answer };
  const want = errorStatus[code];
  if (answer.status === undefined)
    return { check, ok: false, detail: `answered without an error (want ${want} ${code})` };
  const problems: string[] = [];
  if (answer.status !== want) problems.push(`${Header.ServiceErrorCode} is ${answer.status}, want ${want}`);
  if (!answer.message) problems.push(`no ${Header.ServiceError} header`);
  const error = (readBody(answer) as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  if (error?.code !== code || typeof error.message !== 'string')
    problems.push(`body is not {error: {code: "${code}", message}}`);
  if (problems.length > 0) return { check, ok: false, detail: problems.join('; ') };
  return { check, ok: true, detail: `${want} ${code}: ${error?.message}` };
}

/**
 * The body of a successful answer, read as the dispatcher reads a reply (`decodeReply`: by its
 * Content-Type, else `decodeUnlabelled`: MessagePack, failing that JSON), and whether it was JSON
 * without the header; or what went wrong.
 */
function success(answer: Answer | string): { value: Record<string, unknown>; unlabelledJson: boolean } | string {
  if (typeof answer === 'string') return answer;
  if (answer.status !== undefined) return `answered error ${answer.status}: ${answer.message}`;
  let value: unknown;
  let unlabelledJson = false;
  try {
    value =
      answer.contentType === undefined
        ? decodeUnlabelled(answer.data, (data, encoding) => {
            const decoded = decodeBody(data, encoding);
            unlabelledJson = encoding === Encoding.Json;
            return decoded;
          })
        : decodeReply(answer.data, answer.contentType);
  } catch (err) {
    return `reply is ${(err as Error).message}`;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return `reply is not a map: ${JSON.stringify(value)?.slice(0, 80)}`;
  return { value: value as Record<string, unknown>, unlabelledJson };
}

/** A body as the dispatcher reads a reply, or undefined when nothing decodes it. */
function readBody(answer: Answer): unknown {
  try {
    return decodeReply(answer.data, answer.contentType);
  } catch {
    return undefined;
  }
}
