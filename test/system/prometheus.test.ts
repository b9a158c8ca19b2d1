import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAccount } from '@nats-io/nkeys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { mintGrant } from '../../src/identity/mint.js';
import { tracked } from '../harness/children.js';
import { eventually } from '../harness/eventually.js';
import { freePort, type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { runScript, type ServiceProcess, startService } from '../harness/service.js';

/** A Prometheus server (Debian's `prometheus`) scraping one target every second, in a directory of its own. */
async function startPrometheus(target: string): Promise<{ url: string; stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'prometheus-test-'));
  const config = join(dir, 'prometheus.yml');
  writeFileSync(
    config,
    `global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: matrix\n    scrape_interval: 1s\n    static_configs:\n      - targets: ['${target}']\n`,
  );
  const port = await freePort();
  const child: ChildProcess = tracked(
    spawn(
      process.env.PROMETHEUS_BIN ?? 'prometheus',
      [`--config.file=${config}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    ),
  );
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const spawned = new Promise<void>((_, reject) => {
    child.once('error', (err) =>
      reject(new Error(`cannot run prometheus (install it: apt-get install prometheus): ${err.message}`)),
    );
    child.once('exit', (code) => reject(new Error(`prometheus exited with ${code}: ${stderr}`)));
  });
  spawned.catch(() => {});
  const url = `http://127.0.0.1:${port}`;
  await Promise.race([
    spawned,
    eventually(async () => expect((await fetch(`${url}/-/ready`)).status).toBe(200), {
      timeoutMs: 20_000,
      intervalMs: 100,
    }),
  ]);
  return {
    url,
    stop: async () => {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe('serve --metrics-port', () => {
  let server: ProcessNats;
  let service: ServiceProcess;
  let metricsPort: number;

  beforeAll(async () => {
    server = await startNatsProcess();
    metricsPort = await freePort();
    service = await startService(server.url, { MATRIX_METRICS_PORT: String(metricsPort) });
  });
  afterAll(async () => {
    await service?.stop();
    await server.stop();
  });

  it('exposes the call counter and the cache lookups, which a real Prometheus scrapes and answers queries for', async () => {
    const nc = await connectBus({ servers: server.url });
    const client = new BusClient(nc);
    // The same session twice: the dispatcher's session cache misses, then hits.
    for (const id of ['p-1', 'p-2']) {
      const result = await client.request<ToolResult>('system.dispatcher', '$call', {
        session: { profile: 'evaluate' },
        call: { id, name: 'trace_query', arguments: {} },
      });
      expect(result.isError).toBe(false);
    }
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(text).toMatch(/^matrix_tool_calls_total\{[^}]*gen_ai_tool_name="trace_query"[^}]*\} 2/m);
    expect(text).toContain('# TYPE matrix_tool_call_duration histogram');
    expect(text).toMatch(/^matrix_cache_lookups_total\{matrix_cache="sessions",matrix_cache_result="hit"[^}]*\} 1/m);
    expect(text).toMatch(/^matrix_cache_lookups_total\{matrix_cache="sessions",matrix_cache_result="miss"[^}]*\} 1/m);

    const prometheus = await startPrometheus(`127.0.0.1:${metricsPort}`);
    try {
      const query = encodeURIComponent(
        'sum(matrix_tool_calls_total{gen_ai_tool_name="trace_query",matrix_outcome="ok"})',
      );
      const value = await eventually(
        async () => {
          const body = (await (await fetch(`${prometheus.url}/api/v1/query?query=${query}`)).json()) as {
            data: { result: { value: [number, string] }[] };
          };
          return body.data.result[0]?.value[1] ?? false;
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      expect(Number(value)).toBe(2);
      // The session cache's hit ratio, as a dashboard would ask for it.
      const ratio = encodeURIComponent(
        'sum(matrix_cache_lookups_total{matrix_cache="sessions",matrix_cache_result="hit"}) / sum(matrix_cache_lookups_total{matrix_cache="sessions"})',
      );
      const hitRatio = await eventually(async () => {
        const body = (await (await fetch(`${prometheus.url}/api/v1/query?query=${ratio}`)).json()) as {
          data: { result: { value: [number, string] }[] };
        };
        return body.data.result[0]?.value[1] ?? false;
      });
      expect(Number(hitRatio)).toBe(0.5);
    } finally {
      await prometheus.stop();
      client.close();
      await nc.close();
    }
  });

  it('refuses a metrics port that is not a number, or is taken, in one line and exit code 2', async () => {
    const bad = await runScript('dist/src/cli/main.js', server.url, 15_000, ['serve', '--metrics-port', 'nine']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--metrics-port must be a whole number from 0 to 65535, got 'nine'");
    const taken = await runScript('dist/src/cli/main.js', server.url, 15_000, [
      'serve',
      '--metrics-port',
      String(metricsPort),
    ]);
    expect(taken.code).toBe(2);
    expect(taken.stderr).toContain(`cannot serve metrics on port ${metricsPort}`);
  });
});

describe('serve --metrics-port under a flood of made-up tool names', () => {
  let server: ProcessNats;
  let service: ServiceProcess;
  let metricsPort: number;
  const issuer = createAccount();
  const token = 'scrape-secret';

  beforeAll(async () => {
    server = await startNatsProcess();
    metricsPort = await freePort();
    service = await startService(server.url, {
      MATRIX_METRICS_PORT: String(metricsPort),
      MATRIX_METRICS_TOKEN: token,
      MATRIX_TRUSTED_ISSUERS: issuer.getPublicKey(),
    });
  });
  afterAll(async () => {
    await service?.stop();
    await server.stop();
  });

  const scrape = async () => {
    const response = await fetch(`http://127.0.0.1:${metricsPort}/metrics`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(response.status).toBe(200);
    return response.text();
  };
  const callSeries = (text: string) => text.split('\n').filter((line) => line.startsWith('matrix_tool_calls_total{'));

  it('counts them under fixed labels, so the series stay as many as before the flood', async () => {
    const nc = await connectBus({ servers: server.url });
    const client = new BusClient(nc, { timeoutMs: 30_000 });
    const grant = mintGrant(issuer, {
      principal: 'agent:alpha',
      session: 'sess-alpha',
      resolve: { profile: 'evaluate' },
      ttlSeconds: 600,
    });
    const call = (name: string, ctx = {}) =>
      client.request('system.dispatcher', '$call', { session: { profile: 'evaluate' }, call: { id: name, name } }, ctx);
    // One round of each kind first: the series a quiet service would show.
    await call('trace_query', { grant });
    await call('made-up-0', { grant });
    await call('made-up-0').catch(() => undefined);
    await call('matrix_introspect').catch(() => undefined);
    const before = callSeries(await eventually(scrape));
    expect(before.length).toBeGreaterThan(0);
    const flood: Promise<unknown>[] = [];
    for (let i = 1; i <= 2_500; i++) flood.push(call(`made-up-${i}`).catch(() => undefined));
    for (let i = 0; i < 200; i++) flood.push(call('matrix_introspect').catch(() => undefined));
    for (let i = 1; i <= 500; i++) flood.push(call(`granted-made-up-${i}`, { grant }));
    await Promise.all(flood);
    const text = await eventually(async () => {
      const t = await scrape();
      expect(t).toMatch(/gen_ai_tool_name="\(unverified\)"[^}]*\} 2702/);
      return t;
    });
    const after = callSeries(text);
    expect(after.length).toBe(before.length);
    expect(text).not.toContain('made-up');
    // The unauthenticated calls naming a real tool are not that tool's errors.
    expect(text).not.toMatch(/matrix_tool_calls_total\{[^}]*gen_ai_tool_name="matrix_introspect"/);
    expect(text).toMatch(/matrix_tool_calls_total\{[^}]*gen_ai_tool_name="\(unknown\)"[^}]*\} 501/);
    client.close();
    await nc.close();
  });

  it('answers /metrics only with its bearer token, and only on 127.0.0.1 unless told', async () => {
    expect((await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).status).toBe(401);
    const wrong = await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { headers: { authorization: 'Bearer nope' } });
    expect(wrong.status).toBe(401);
    expect(service.output()).toContain(`metrics on 127.0.0.1:${metricsPort}/metrics (bearer token)`);
  });
});
