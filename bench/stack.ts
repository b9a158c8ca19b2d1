/**
 * The processes `npm run bench` measures, on one nats-server: an account each, with its own
 * subjects and JetStream, so several services can each be `system.dispatcher` in their own
 * account while sharing the server, the echo target and the minutes they are measured in.
 *
 * - `main`: the service as shipped (`serve`: audit trail, its stream and indexer), the relay;
 *   every service row but the grant A/B's.
 * - `trust` and `gates`: `bench/gates.ts`, one process serving twice: trusting a grant issuer in
 *   `trust` (the rows with a grant), trusting its callers in `gates` (the same rows without).
 * - `noaudit`: `bench/unaudited.ts`, the service with the audit trail off (what the trail costs).
 * - `base`: the service as an earlier commit built it (`BENCH_BASE`), beside today's, so that
 *   the plain `$call` of the two is compared in the same minutes.
 *
 * One echo process answers in every account, so rows compared across accounts share its cost.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { connectBus } from '../src/bus/connect.js';
import type { ToolContextSpec } from '../src/registry/types.js';
import { startNatsProcess } from '../test/harness/nats-server.js';
import { processCpu } from './measure.js';

/** The accounts of the bench's nats-server; each user's password is its name. */
export const Account = { Main: 'main', Trust: 'trust', Gates: 'gates', NoAudit: 'noaudit', Base: 'base' } as const;
export type Account = (typeof Account)[keyof typeof Account];
const ACCOUNTS = Object.values(Account);

export const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));

/** The bench's nats-server: one account per `Account`, JetStream in each. */
export async function startAccountsServer() {
  const dir = mkdtempSync(join(tmpdir(), 'bench-nats-'));
  const config = join(dir, 'accounts.conf');
  const accounts = ACCOUNTS.map((a) => `  ${a}: { jetstream: enabled, users: [{ user: ${a}, password: ${a} }] }`);
  writeFileSync(config, ['accounts: {', ...accounts, '}', ''].join('\n'));
  const nats = await startNatsProcess(['-m', '0', '-c', config]);
  return {
    url: nats.url,
    get pid() {
      return nats.pid;
    },
    /** A connection as `account`'s user. */
    connect: (account: Account, name: string) => connectBus({ servers: nats.url, name, user: account, pass: account }),
    stop: async () => {
      await nats.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The environment a child connects with as `account`'s user. */
export function accountEnv(url: string, account: Account): Record<string, string> {
  return { NATS_URL: url, NATS_USER: account, NATS_PASSWORD: account };
}

/**
 * The MCP host (`matrix-tools mcp-host`, issue 42) in a process of its own as `account`, hosting
 * the MCP rows' echo server (`mcp-server.ts`) as the context `mcp.bench`, registered through the
 * service; approval `never`, as the echo tool says nothing of being read-only. Resolves once the
 * host is up (its server may still be starting).
 */
export function spawnMcpHost(url: string, account: Account): Promise<ChildProcess & { said: string }> {
  const file = join(mkdtempSync(join(tmpdir(), 'bench-mcp-host-')), 'mcp.json');
  const bench = { command: process.execPath, args: [here('./mcp-server.js')], matrix: { approval: 'never' } };
  writeFileSync(file, JSON.stringify({ mcpServers: { bench } }));
  return spawnReady(here('../src/cli/main.js'), accountEnv(url, account), 'stderr', 'mcp host ready: ', [
    'mcp-host',
    '--mcp-servers',
    file,
  ]);
}

/** Writes `specs` straight into a bucket (made when missing). */
export async function populate(nc: NatsConnection, bucket: string, specs: ToolContextSpec[]): Promise<void> {
  const kv = await new Kvm(nc).create(bucket, { history: 1 });
  for (let i = 0; i < specs.length; i += 500) {
    await Promise.all(specs.slice(i, i + 500).map((s) => kv.put(s.key, JSON.stringify(s))));
  }
}

/** Starts `script` with `env` (and node flags) and resolves once `stream` has printed `ready`. */
export function spawnReady(
  script: string,
  env: Record<string, string>,
  stream: 'stdout' | 'stderr',
  ready: string,
  args: string[] = [],
  nodeFlags: string[] = [],
): Promise<ChildProcess & { said: string }> {
  const child = spawn(process.execPath, [...nodeFlags, script, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let seen = '';
  return new Promise((resolve, reject) => {
    // A child that never gets ready is killed: nothing else would stop it.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${script} not ready: ${seen}`));
    }, 60_000);
    child[stream]?.on('data', (d: Buffer) => {
      seen += d.toString();
      if (seen.includes(ready)) {
        clearTimeout(timer);
        resolve(Object.assign(child, { said: seen }));
      }
    });
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}: ${seen}`)));
  });
}

/** Stops a child with `signal` and waits for it to exit (at most 10 s). */
export async function stopChild(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 10_000))]);
}

/** RSS of a registry process serving `bucket`, in MiB (its `--no-dispatcher` service, in `main`). */
export async function registryRss(url: string, bucket: string): Promise<number> {
  const child = await spawnReady(
    here('../src/main.js'),
    { ...accountEnv(url, Account.Main), MATRIX_TOOLS_BUCKET: bucket },
    'stderr',
    ' ready ',
    ['--no-dispatcher'],
  );
  await new Promise((r) => setTimeout(r, 500));
  const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
  child.kill('SIGKILL');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

/** CPU so far of each named child, µs. */
export function childrenCpu(children: Record<string, ChildProcess | { pid?: number | undefined }>) {
  return Object.fromEntries(Object.entries(children).map(([name, c]) => [name, processCpu(c.pid)]));
}

/** The repository the bench runs from (its dist/ is in the repository's root). */
const REPO = here('../..');

/**
 * The service of commit `rev`, built beside this one (in `.bench-base/<rev>`, sharing its
 * node_modules): the path of its `src/main.js`. Built once per commit. A path of a `.js`
 * file that exists is that service itself.
 */
export function buildBase(rev: string): string {
  // A service script given as it is (a throwaway build for an experiment).
  if (rev.endsWith('.js') && existsSync(rev)) return rev;
  const sha = execFileSync('git', ['-C', REPO, 'rev-parse', '--verify', `${rev}^{commit}`], {
    encoding: 'utf8',
  }).trim();
  const dir = join(REPO, '.bench-base', sha);
  const main = join(dir, 'dist', 'src', 'main.js');
  if (existsSync(main)) return main;
  mkdirSync(dir, { recursive: true });
  // The tree of a recent commit is past execFileSync's default 1 MiB of output.
  const tree = execFileSync('git', ['-C', REPO, 'archive', sha, 'src', 'contracts', 'tsconfig.json', 'package.json'], {
    maxBuffer: 256 * 1024 * 1024,
  });
  execFileSync('tar', ['-x', '-C', dir], { input: tree });
  writeFileSync(
    join(dir, 'tsconfig.base.json'),
    JSON.stringify({ extends: './tsconfig.json', include: ['src'], compilerOptions: { declaration: false } }),
  );
  execFileSync(
    process.execPath,
    [join(REPO, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(dir, 'tsconfig.base.json')],
    {
      stdio: 'inherit',
    },
  );
  return main;
}

/** `url` with `user` and `pass` in it, when given. */
export function withUser(url: string, user: string | undefined, pass: string | undefined): string {
  if (user === undefined) return url;
  const u = new URL(url);
  u.username = user;
  u.password = pass ?? '';
  return u.toString();
}
