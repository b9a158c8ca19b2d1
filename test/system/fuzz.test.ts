import { readFileSync } from 'node:fs';
import { decode } from '@msgpack/msgpack';
import { headers, type Msg, type NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contracts, SchemaId } from '../../src/bus/contracts.js';
import { sharedNatsUrl, testConnection } from '../harness/bus.js';
import { type FuzzCase, fuzzCase, prng } from '../harness/fuzz.js';
import { type ServiceProcess, startScript } from '../harness/service.js';

/** Sized by the environment: FUZZ_SEED, FUZZ_ROUNDS (default 4, the least the memory check needs), FUZZ_PER_ROUND (default 2000). */
const SEED = Number(process.env.FUZZ_SEED) || 20261130;
const ROUNDS = Math.max(4, Number(process.env.FUZZ_ROUNDS) || 4);
const PER_ROUND = Number(process.env.FUZZ_PER_ROUND) || 2_000;
const IN_FLIGHT = 32;
/** A minute for start-up and checks, and 10 ms a request: a loaded machine, not the expected time. */
const TIMEOUT_MS = 60_000 + ROUNDS * PER_ROUND * 10;

const spec = { key: 'fuzz-ok', title: 'Fuzz', description: 'valid', permissions: { approval: 'never' } };
/** Every op of every mount `serve` runs, with one valid request and the schema it must pass. */
const ops: Array<{ subject: string; valid: Record<string, unknown>; schema?: string }> = [
  { subject: 'system.tools.$list', valid: { limit: 5 }, schema: SchemaId.ListRequest },
  { subject: 'system.tools.$resolve', valid: { profile: 'default' }, schema: SchemaId.ResolveRequest },
  { subject: 'system.tools.$register', valid: { spec }, schema: SchemaId.RegisterRequest },
  { subject: 'system.tools.$unregister', valid: { key: 'fuzz-gone' }, schema: SchemaId.UnregisterRequest },
  { subject: 'system.tools.$introspect', valid: {}, schema: SchemaId.IntrospectRequest },
  {
    subject: 'system.dispatcher.$call',
    valid: { session: { profile: 'default' }, call: { id: '1', name: 'session_state_read' } },
    schema: SchemaId.CallRequest,
  },
  { subject: 'system.dispatcher.$introspect', valid: {}, schema: SchemaId.IntrospectRequest },
  { subject: 'system.agents.$introspect', valid: { mount: 'system.tools' }, schema: SchemaId.AgentsIntrospectRequest },
  { subject: 'system.sessions.$read', valid: { session: 'fuzz' }, schema: SchemaId.SessionReadRequest },
  {
    subject: 'system.sessions.$write',
    valid: { session: 'fuzz', values: { a: 1 } },
    schema: SchemaId.SessionWriteRequest,
  },
  { subject: 'system.traces.$query', valid: { limit: 5 }, schema: SchemaId.TraceQueryRequest },
  { subject: 'system.packages.$validate', valid: { spec }, schema: SchemaId.PackageValidateRequest },
  {
    subject: 'system.approvals.$decide',
    valid: { callId: '1', tool: 't', target: 'app.x', op: '$y', arguments: {} },
    schema: SchemaId.ApprovalRequest,
  },
  { subject: 'system.tools.$nope', valid: {} },
  { subject: 'system.sessions.$drop', valid: { session: 'fuzz' } },
];

/** What the protocol says a body is: undecodable, or a map that does or does not pass the op's schema. */
function expectation(c: FuzzCase, schema: string | undefined): 'error' | 'either' {
  if (schema === undefined) return 'error'; // unknown op
  let value: unknown;
  try {
    value = c.body.length === 0 ? {} : c.json ? JSON.parse(new TextDecoder().decode(c.body)) : decode(c.body);
  } catch {
    return 'error';
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value) || value instanceof Uint8Array)
    return 'error';
  return contracts().check(schema)(value) === undefined ? 'either' : 'error';
}

function rssMiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;
}

describe(`fuzzing every op of every mount (seed ${SEED})`, { timeout: TIMEOUT_MS }, () => {
  let nc: NatsConnection;
  let served: ServiceProcess;

  beforeAll(async () => {
    nc = await testConnection();
    served = await startScript(
      'dist/src/cli/main.js',
      sharedNatsUrl(),
      ' ready ',
      { MATRIX_TOOLS_BUCKET: `fuzz-${process.pid}`, MATRIX_SESSIONS_BUCKET: `fuzz-sessions-${process.pid}` },
      ['serve'],
    );
  });
  afterAll(async () => {
    await served.stop('SIGTERM');
  });

  it(`answers ${ROUNDS * PER_ROUND} malformed requests with typed errors, keeps running, keeps its memory`, async () => {
    const r = prng(SEED);
    const tally = new Map<string, number>();
    const failures: string[] = [];
    const rss: number[] = [];
    const pid = served.child.pid as number;
    const codes = new Set([
      'bad_request',
      'not_found',
      'forbidden',
      'conflict',
      'payload_too_large',
      'unavailable',
      'timeout',
      'internal',
    ]);

    const one = async () => {
      const op = ops[Math.floor(r() * ops.length)] as (typeof ops)[number];
      const c = fuzzCase(r, op.valid);
      const expected = expectation(c, op.schema);
      const h = headers();
      if (c.json) h.set('Content-Type', 'application/json');
      let msg: Msg;
      try {
        msg = await nc.request(op.subject, c.body, { timeout: 10_000, headers: h });
      } catch (err) {
        failures.push(`${op.subject} ${c.kind}: no answer (${(err as Error).message})`);
        return;
      }
      const status = msg.headers?.get('Nats-Service-Error-Code');
      const key = `${c.kind} → ${status ? `error ${status}` : 'ok'}`;
      tally.set(key, (tally.get(key) ?? 0) + 1);
      if (!status) {
        if (expected === 'error') failures.push(`${op.subject} ${c.kind}: accepted a body its contract refuses`);
        return;
      }
      const body = (
        msg.headers?.get('Content-Type') === 'application/json'
          ? JSON.parse(new TextDecoder().decode(msg.data))
          : decode(msg.data)
      ) as {
        error?: { code?: string; message?: string };
      };
      if (!codes.has(String(body.error?.code)))
        failures.push(`${op.subject} ${c.kind}: untyped error ${JSON.stringify(body).slice(0, 200)}`);
      if (/\n\s+at |\.ts:\d+|\.js:\d+/.test(String(body.error?.message)))
        failures.push(`${op.subject} ${c.kind}: a stack trace in the reply`);
      if (expected === 'error' && !['400', '404', '413'].includes(status))
        failures.push(`${op.subject} ${c.kind}: ${status} for a malformed body`);
    };

    for (let round = 0; round < ROUNDS; round++) {
      let next = 0;
      await Promise.all(
        Array.from({ length: IN_FLIGHT }, async () => {
          while (next++ < PER_ROUND) await one();
        }),
      );
      rss.push(rssMiB(pid));
    }

    console.info(
      `fuzz seed ${SEED}: ${ROUNDS * PER_ROUND} requests; RSS after each round ${rss.map((x) => x.toFixed(0)).join(' → ')} MiB`,
    );
    console.info(
      [...tally]
        .sort()
        .map(([k, n]) => `  ${k}: ${n}`)
        .join('\n'),
    );
    expect(failures.length, failures.slice(0, 20).join('\n')).toBe(0);
    expect(served.child.exitCode).toBeNull();
    // Flat: what the last rounds settle at is little above what the first ones did. One sample
    // is noisy (the allocator keeps pages of the 900 KB strings for a while): the lower of two
    // samples at each end lets a passing spike through, and still catches steady growth.
    const settled = (a: number, b: number) => Math.min(rss[a] as number, rss[b] as number);
    expect(settled(ROUNDS - 2, ROUNDS - 1) - settled(0, 1)).toBeLessThan(40);

    const good = await nc.request('system.tools.$resolve', new TextEncoder().encode('{"profile":"default"}'), {
      timeout: 5_000,
      headers: jsonHeaders(),
    });
    expect(good.headers?.get('Nats-Service-Error-Code')).toBe('');
    expect(JSON.parse(new TextDecoder().decode(good.data)).contexts).toEqual(['actor-readonly']);
  });
});

function jsonHeaders() {
  const h = headers();
  h.set('Content-Type', 'application/json');
  return h;
}
