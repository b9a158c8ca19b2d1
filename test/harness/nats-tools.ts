/**
 * The NATS tools the tests run, each at a version: nats-server (the newest and the oldest
 * supported line, and one affected by CVE-2026-33223), natscli and nsc. Each is built once by
 * scripts/nats.sh into a cache outside the tree, so a fresh machine needs only Go.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The versions the tests name. `newest` and `oldest` are the supported lines' (README). */
export const NatsVersion = {
  /** The newest release: the whole suite runs on it. */
  newest: '2.15.3',
  /** The oldest supported line's newest patch: the integration tier runs on it too. */
  oldest: '2.14.10',
  /** A server without the fix for CVE-2026-33223 and CVE-2026-33246 (fixed in 2.12.6). */
  affected: '2.12.5',
  /** natscli, the `nats` command. */
  cli: '0.5.0',
  /** nsc, for operator-mode (decentralized) deployments. */
  nsc: '2.12.0',
} as const;

/**
 * scripts/nats.sh of the repository, from the URL of this module: in test/harness/ when the tests
 * run it, in dist/test/harness/ when a bench does (`npm run bench`, `bench:search`).
 */
export function natsScriptOf(moduleUrl: string): string {
  const up = new URL(moduleUrl).pathname.includes('/dist/test/harness/') ? '../../../' : '../../';
  return fileURLToPath(new URL(`${up}scripts/nats.sh`, moduleUrl));
}

const script = natsScriptOf(import.meta.url);
const paths = new Map<string, string>();

/** The path of `tool` at `version`, built on first use (minutes on a fresh machine, then cached). */
export function natsTool(tool: 'server' | 'cli' | 'nsc', version: string): string {
  const key = `${tool}@${version}`;
  let path = paths.get(key);
  if (path === undefined) {
    path = execFileSync(script, [tool, version], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
    paths.set(key, path);
  }
  return path;
}
