import type { MsgHdrs } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { MatrixError } from '../../src/bus/errors.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import type { GrantAuthority } from '../../src/identity/types.js';
import type { ResolvedToolContext } from '../../src/registry/types.js';
import { eventually } from '../harness/eventually.js';
import { prng } from '../harness/fuzz.js';
import { type SecuredBus, startSecuredBus } from '../harness/identity.js';

const SEED = Number(process.env.FUZZ_SEED) || 20261130;
const CALLS = 2_000;
const IN_FLIGHT = 16;

/** The authorities grants are minted for: built-in profiles, refs, skills, and none at all. */
const authorities: GrantAuthority[] = [
  { profile: 'default' },
  { profile: 'edit' },
  { profile: 'evaluate' },
  { profile: 'nobody' },
  { profile: 'default', toolContextRefs: ['spy-tools'] },
  { profile: 'edit', skills: [{ name: 'spying', toolContextRefs: ['spy-tools'] }] },
  { profile: 'propose', worker: 'codex', environment: { repoRoot: '/repo' } },
];

interface Granted {
  grant: string;
  authority: GrantAuthority;
  /** What its resolution lets it reach among the app.> targets. */
  allows(subject: string): boolean;
}

describe(`seeded random calls as the agent user, with grants for random profiles (seed ${SEED})`, () => {
  let bus: SecuredBus;
  let agent: BusClient;
  const granted = new Map<string, Granted>();
  const arrivals: Array<{ subject: string; session: string | undefined }> = [];

  beforeAll(async () => {
    bus = await startSecuredBus();
    agent = new BusClient(await bus.connect('agent'), { timeoutMs: 10_000 });
    // Every request that reaches any app.> target, with the session the dispatcher sent (seen as
    // `service`: a mount's user receives its own mount's requests only).
    const mountNc = await bus.connect('service');
    mountNc.subscribe('app.>', {
      callback: (err, msg) =>
        void (err === null && arrivals.push({ subject: msg.subject, session: sessionOf(msg.headers) })),
    });
    await mountNc.flush();
    for (const [i, authority] of authorities.entries()) {
      const session = `fuzz-${i}`;
      const grant = bus.grant({ principal: `agent:fuzz-${i}`, session, resolve: authority });
      const tools = new Set(
        (await agent.request<ResolvedToolContext>('system.tools', '$resolve', authority, { grant })).matrixTools.map(
          (t) => t.name,
        ),
      );
      // The policy approves matrix_invoke on app.spy, never $delete for agent:*, nothing else.
      const allows = (subject: string) =>
        (tools.has('spy_run') && subject === 'app.spy.$run') ||
        (tools.has('matrix_invoke') && /^app\.spy\.\$(run|read)$/.test(subject));
      granted.set(session, { grant, authority, allows });
    }
  });
  afterAll(async () => {
    agent?.close();
    await bus?.stop();
  });

  it(`reaches no subject a grant does not allow over ${CALLS} calls, forged bodies, headers and grants included`, async () => {
    const r = prng(SEED);
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)] as T;
    const sessions = [...granted.keys()];
    const tally = new Map<string, number>();
    const count = (key: string) => tally.set(key, (tally.get(key) ?? 0) + 1);
    let succeeded = 0;

    const one = async (i: number) => {
      const own = granted.get(pick(sessions)) as Granted;
      const attack = r();
      // A fifth ask for another grant's authority; some forge headers; some send a broken or no grant.
      const body = attack < 0.2 ? (granted.get(pick(sessions)) as Granted).authority : own.authority;
      let grant: string | undefined = own.grant;
      if (attack > 0.95) grant = undefined;
      else if (attack > 0.9) grant = `${own.grant.slice(0, -8)}AAAAAAAA`;
      const ctx = { grant, ...(r() < 0.3 ? { principal: 'user:ops-root', session: pick(sessions) } : {}) };
      const name = pick([
        'spy_run',
        'matrix_invoke',
        'matrix_invoke',
        'session_state_read',
        'matrix_introspect',
        'trace_query',
        'nope',
      ]);
      const invoke = {
        target: pick(['app.spy', 'app.secret', 'app.spy.deeper', 'system.sessions', 'app']),
        op: pick(['$run', '$read', '$delete']),
        args: {},
      };
      const args = name === 'matrix_invoke' || r() < 0.1 ? invoke : {};
      if (r() < 0.05) {
        // Straight at a target or a reference mount, around the dispatcher: NATS refuses the publish.
        const [mount, op] = pick([
          ['app.spy', '$run'],
          ['app.secret', '$run'],
          ['system.sessions', '$read'],
          ['system.traces', '$query'],
          ['system.approvals', '$decide'],
        ]) as [string, string];
        await agent.request(mount, op, { session: pick(sessions) }).then(
          () => count('direct: reached'),
          (err: unknown) => count(`direct: ${(err as MatrixError).code}`),
        );
        return;
      }
      try {
        const result = await agent.request<ToolResult>(
          'system.dispatcher',
          '$call',
          { session: body, call: { id: `f${i}`, name, arguments: args } },
          ctx,
        );
        count(result.isError ? `result ${result.error?.code}` : 'result ok');
        if (!result.isError) succeeded++;
      } catch (err) {
        count(
          `refused ${err instanceof MatrixError ? `${err.code} ${String(err.details?.grant ?? '')}` : String(err)}`,
        );
      }
    };

    let next = 0;
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < CALLS) await one(next++);
      }),
    );
    await eventually(() => expect(arrivals.length).toBeGreaterThanOrEqual(bus.spy.count()));

    const outside = arrivals.filter((a) => {
      const g = a.session === undefined ? undefined : granted.get(a.session);
      return g === undefined || !g.allows(a.subject);
    });
    console.info(
      `identity fuzz seed ${SEED}: ${CALLS} calls as agent, ${arrivals.length} reached app.> targets, ${outside.length} outside their grant\n${[
        ...tally,
      ]
        .sort()
        .map(([k, n]) => `  ${k}: ${n}`)
        .join('\n')}`,
    );
    expect(outside).toEqual([]);
    expect(bus.secret.count()).toBe(0);
    // Any answer but NATS's refusal (a bad_request included) means the request reached the mount.
    expect([...tally.keys()].filter((k) => k.startsWith('direct:'))).toEqual(['direct: forbidden']);
    expect(succeeded).toBeGreaterThan(100);
    expect(arrivals.length).toBeGreaterThan(50);
  }, 120_000);
});

function sessionOf(h: MsgHdrs | undefined): string | undefined {
  return h?.get('Matrix-Session') || undefined;
}
