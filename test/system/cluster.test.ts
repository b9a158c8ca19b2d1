import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import type { ListReply } from '../../src/registry/types.js';
import { eventually } from '../harness/eventually.js';
import { okCalls, STAGE_CALLS, startLoad } from '../harness/load.js';
import { freePort, type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { contextSpec } from '../harness/registry.js';
import { type ServiceProcess, startScript } from '../harness/service.js';
import { startTarget } from '../harness/targets.js';

describe('a 3-node NATS cluster losing a node under load', () => {
  const nodes: ProcessNats[] = [];
  const connections: NatsConnection[] = [];
  let service: ServiceProcess | undefined;
  afterAll(async () => {
    await service?.stop('SIGKILL');
    for (const nc of connections) await nc.close().catch(() => {});
    for (const n of nodes) await n.stop();
  });

  it('keeps every registration (KV with 3 replicas) and resumes calls within 5 s', async () => {
    const routes = await Promise.all([freePort(), freePort(), freePort()]);
    const routeList = routes.map((p) => `nats://127.0.0.1:${p}`).join(',');
    for (const [i, port] of routes.entries()) {
      nodes.push(
        await startNatsProcess([
          '--server_name',
          `n${i}`,
          '--cluster_name',
          'matrix-test',
          '--cluster',
          `nats://127.0.0.1:${port}`,
          '--routes',
          routeList,
        ]),
      );
    }
    const all = nodes.map((n) => n.url).join(',');
    const setup = await connectBus({ servers: all });
    connections.push(setup);
    // JetStream elects its meta leader after the routes form: retry until the R3 bucket exists.
    await eventually(() => new Kvm(setup).create('cluster-tools', { replicas: 3, history: 5 }), {
      timeoutMs: 30_000,
      intervalMs: 250,
    });

    // The service knows only node 0: losing it, it must fail over to what the cluster told it.
    service = await startScript(
      'dist/src/cli/main.js',
      nodes[0]?.url ?? '',
      ' ready ',
      { MATRIX_TOOLS_BUCKET: 'cluster-tools', MATRIX_TOOLS_REPLICAS: '3' },
      ['serve', '--no-reference'],
    );
    const targetNc = await connectBus({
      servers: nodes
        .slice(1)
        .map((n) => n.url)
        .join(','),
    });
    const clientNc = await connectBus({ servers: [nodes[2]?.url, nodes[1]?.url].join(',') });
    connections.push(targetNc, clientNc);
    await startTarget(targetNc, 'app.echo', { $echo: (args) => args });
    const client = new BusClient(clientNc, { timeoutMs: 2_000 });
    for (let i = 0; i < 20; i++) {
      await client.request('system.tools', '$register', {
        spec: contextSpec(`cl-${i}`, {
          matrixTools: [
            {
              name: `echo_${i}`,
              description: 'echo',
              inputSchema: { type: 'object' },
              target: 'app.echo',
              op: '$echo',
            },
          ],
        }),
      });
    }
    const session = { profile: 'p', toolContextRefs: ['cl-7'] };
    // A 1 s deadline: calls the dead node held free their callers after 1 s.
    const loadClient = new BusClient(clientNc, { timeoutMs: 1_000 });
    const load = startLoad(async () => {
      const r = await loadClient.request<ToolResult>('system.dispatcher', '$call', {
        session,
        call: { id: 'c', name: 'echo_7', arguments: {} },
      });
      if (r.isError) throw Object.assign(new Error(r.content), { name: r.error?.code ?? 'tool_error' });
    }, 32);
    await eventually(() => expect(okCalls(load)).toBeGreaterThanOrEqual(STAGE_CALLS));
    const killedAt = performance.now();
    await nodes[0]?.kill();
    // Judged once calls have resumed and enough more have been made since.
    const firstOkAfter = () =>
      load.records.filter((r) => r.ok && r.started >= killedAt).sort((a, b) => a.ended - b.ended)[0];
    await eventually(
      () => {
        const first = firstOkAfter();
        expect(first).toBeDefined();
        expect(load.records.filter((r) => r.started > (first?.ended ?? Infinity)).length).toBeGreaterThanOrEqual(
          STAGE_CALLS,
        );
      },
      { timeoutMs: 30_000 },
    );
    const records = await load.stop();

    const afterKill = records.filter((r) => r.started >= killedAt);
    const firstOk = firstOkAfter();
    const resumedMs = firstOk === undefined ? Infinity : firstOk.ended - killedAt;
    const settled = afterKill.filter((r) => firstOk !== undefined && r.started > firstOk.ended);
    console.info(
      `cluster node loss: ${records.length} calls; ${afterKill.filter((r) => !r.ok).length} of ${afterKill.length} started after the kill failed; ` +
        `calls resumed ${resumedMs.toFixed(0)} ms after the kill; after that ${settled.filter((r) => r.ok).length}/${settled.length} ok`,
    );
    expect(resumedMs).toBeLessThan(5_000);
    expect(settled.filter((r) => r.ok).length / settled.length).toBeGreaterThanOrEqual(0.99);

    const page = await client.request<ListReply>('system.tools', '$list', { limit: 500 });
    expect(page.contexts.filter((c) => c.key.startsWith('cl-')).map((c) => c.key)).toHaveLength(20);
    // Writes wait for the bucket's stream to have a Raft leader again (seconds when the dead node led it): retried as a client would.
    const writeFrom = performance.now();
    const errors = new Set<string>();
    const more = await eventually(
      () =>
        client
          .request<{ revision: number }>(
            'system.tools',
            '$register',
            { spec: contextSpec('cl-after') },
            { timeoutMs: 6_000 },
          )
          .catch((err: unknown) => {
            errors.add((err as { code?: string }).code ?? String(err));
            throw err;
          }),
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    console.info(
      `cluster node loss: a new registration took ${(performance.now() - writeFrom).toFixed(0)} ms after the calls resumed (errors meanwhile: ${[...errors].join(', ') || 'none'})`,
    );
    expect([...errors].every((e) => e === 'unavailable' || e === 'timeout')).toBe(true);
    expect(more.revision).toBeGreaterThan(0);
    client.close();
    loadClient.close();
  }, 90_000);
});
