/**
 * The project as a NATS client that knows nothing of it sees it: natscli (`nats`, built from its
 * Go module by scripts/nats.sh) against `serve`. `nats micro ls` / `info` / `stats` list every
 * mount with the endpoints its `$introspect` names; `nats req` of `$resolve` gives a usable reply,
 * and of `system.traces.$query` (an op that reports progress) the reply, not a report; `nats kv
 * ls` shows the project's buckets.
 */
import { execFile } from 'node:child_process';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import { Mounts } from '../../src/bus/subjects.js';
import type { IntrospectReply } from '../../src/registry/types.js';
import { eventually } from '../harness/eventually.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { NatsVersion, natsTool } from '../harness/nats-tools.js';
import { type ServiceProcess, startScript } from '../harness/service.js';

/** Every mount `serve` runs. */
const MOUNTS = Object.values(Mounts);
/** The micro service name a mount answers discovery as. */
const service = (mount: string) => mount.replaceAll('.', '-');

/** What one micro service's INFO or STATS says of its endpoints, as natscli prints it with --json. */
interface Described {
  name: string;
  metadata?: { mount?: string };
  endpoints: Array<{ name: string; subject: string; num_requests?: number }>;
}

describe('natscli against serve', () => {
  let server: ProcessNats;
  let serve: ServiceProcess;
  let nc: NatsConnection;
  let client: BusClient;
  const opsOf = new Map<string, string[]>();

  /** Runs `nats <args>` against the test's server; resolves with its stdout, rejects with its stderr. */
  const nats = (...args: string[]): Promise<string> =>
    new Promise((resolve, reject) => {
      execFile(
        natsTool('cli', NatsVersion.cli),
        ['--server', server.url, '--timeout', '10s', ...args],
        { env: { ...process.env, NATS_CONTEXT: '', HOME: process.env.HOME ?? '/tmp' }, timeout: 30_000 },
        (err, stdout, stderr) =>
          err ? reject(new Error(`nats ${args.join(' ')}: ${stderr || err.message}`)) : resolve(stdout),
      );
    });
  const json = async <T>(...args: string[]): Promise<T> => JSON.parse(await nats(...args)) as T;
  const subjects = (d: Described) => d.endpoints.map((e) => e.subject).sort();
  const expected = (mount: string) => (opsOf.get(mount) ?? []).map((op) => `${mount}.${op}`).sort();

  beforeAll(async () => {
    server = await startNatsProcess();
    serve = await startScript('dist/src/cli/main.js', server.url, ' ready ', {}, ['serve']);
    nc = await connectBus({ servers: server.url, name: 'natscli-test' });
    client = new BusClient(nc, { timeoutMs: 10_000 });
    for (const mount of MOUNTS)
      opsOf.set(
        mount,
        (await client.request<IntrospectReply>(mount, '$introspect', {})).ops.map((o) => o.op),
      );
  }, 60_000);
  afterAll(async () => {
    client?.close();
    if (nc !== undefined && !nc.isClosed()) await nc.close();
    await serve?.stop('SIGTERM');
    await server?.stop();
  });

  it('nats micro ls lists every mount, each with the endpoints its $introspect names', async () => {
    const listed = await json<Described[]>('micro', 'ls', '--json');
    for (const mount of MOUNTS) {
      const one = listed.find((d) => d.name === service(mount));
      expect(one, mount).toBeDefined();
      expect(one?.metadata?.mount).toBe(mount);
      expect(subjects(one as Described), mount).toEqual(expected(mount));
    }
  });

  it('nats micro info and stats describe each mount by its endpoints', async () => {
    await Promise.all(
      MOUNTS.map(async (mount) => {
        const { info } = await json<{ info: Described }>('micro', 'info', service(mount), '--json');
        expect(subjects(info), mount).toEqual(expected(mount));
        const [stats] = await json<Described[]>('micro', 'stats', service(mount), '--json');
        expect(subjects(stats as Described), mount).toEqual(expected(mount));
      }),
    );
  });

  it('nats req system.tools.$resolve, in JSON, gives a usable reply, and stats count it', async () => {
    const reply = JSON.parse(
      await nats(
        'req',
        'system.tools.$resolve',
        '{"profile":"default"}',
        '-H',
        'Content-Type:application/json',
        '--raw',
      ),
    ) as { matrixTools: Array<{ name: string; target: string; op: string }> };
    expect(reply.matrixTools.map((t) => t.name)).toContain('matrix_introspect');
    expect(reply.matrixTools.find((t) => t.name === 'matrix_introspect')).toMatchObject({
      target: 'system.agents',
      op: '$introspect',
    });
    const [stats] = await json<Described[]>('micro', 'stats', 'system-tools', '--json');
    const resolve = stats?.endpoints.find((e) => e.subject === 'system.tools.$resolve');
    expect(resolve?.num_requests).toBeGreaterThanOrEqual(1);
  });

  it('nats req system.traces.$query, an op that reports progress, gets the reply', async () => {
    // One call through the dispatcher puts a batch in the trail, which $query then reads window by window.
    await client.request('system.dispatcher', '$call', {
      session: { profile: 'default' },
      call: { id: 'natscli-1', name: 'matrix_introspect', arguments: { mount: 'system.tools' } },
    });
    await eventually(async () => {
      const reply = JSON.parse(
        await nats('req', 'system.traces.$query', '{}', '-H', 'Content-Type:application/json', '--raw'),
      ) as { events?: unknown[]; progress?: number };
      expect(reply.progress).toBeUndefined();
      expect(reply.events?.length).toBeGreaterThan(0);
    });
  });

  it("nats kv ls shows the project's buckets", async () => {
    const names = (await nats('kv', 'ls', '--names')).split('\n').map((s) => s.trim());
    expect(names).toEqual(
      expect.arrayContaining(['matrix-tool-contexts', 'matrix-sessions', 'matrix-approvals', 'matrix-tasks']),
    );
  });
});
