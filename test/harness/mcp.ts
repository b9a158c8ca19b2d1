/**
 * The MCP bridge as a client runs it: the built CLI (`node dist/src/cli/main.js mcp …`) in a
 * child process, talked to in raw JSON-RPC, one message a line, over its real stdin and stdout.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { sharedNatsEnv } from './bus.js';
import { tracked } from './children.js';
import { eventually } from './eventually.js';
import { users } from './identity.js';

/** The built CLI's entry. */
export const CLI_MAIN = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

/** One JSON-RPC message as it came. */
export interface JsonRpcMessage {
  jsonrpc: '2.0';
  id?: number | string;
  method?: string;
  params?: unknown;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
}

/** A bridge process and a raw JSON-RPC client of it. */
export interface RawBridge {
  child: ChildProcessWithoutNullStreams;
  /** Everything the bridge wrote to stdout, parsed, in order. */
  received: JsonRpcMessage[];
  /** Everything it wrote to stderr so far. */
  stderr(): string;
  /** Writes one message (or a line as it is) to the bridge's stdin. */
  send(message: object | string): void;
  /** Sends a request and resolves with the response of the same id. */
  request(id: number | string, method: string, params?: unknown): Promise<JsonRpcMessage>;
  /** Resolves with the exit code and signal once the process has exited and its output is read. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `matrix-tools mcp <args>` against `natsUrl`; resolves once it says it is ready. */
export async function startRawBridge(natsUrl: string, args: string[]): Promise<RawBridge> {
  const child = tracked(
    spawn(process.execPath, [CLI_MAIN, 'mcp', ...args], {
      env: { ...process.env, ...sharedNatsEnv(natsUrl), NATS_URL: natsUrl },
      stdio: 'pipe',
    }),
  );
  const received: JsonRpcMessage[] = [];
  let stderr = '';
  let pending = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdout.on('data', (d: Buffer) => {
    pending += d.toString();
    for (let end = pending.indexOf('\n'); end >= 0; end = pending.indexOf('\n')) {
      const line = pending.slice(0, end).trim();
      pending = pending.slice(end + 1);
      if (line) received.push(JSON.parse(line) as JsonRpcMessage);
    }
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('close', (code, signal) => resolve({ code, signal })),
  );
  const send = (message: object | string) =>
    child.stdin.write(`${typeof message === 'string' ? message : JSON.stringify(message)}\n`);
  await eventually(() => {
    if (child.exitCode !== null) throw new Error(`the bridge exited with ${child.exitCode}: ${stderr}`);
    return /mcp bridge:? ready/.test(stderr);
  });
  return {
    child,
    received,
    stderr: () => stderr,
    send,
    request: async (id, method, params) => {
      send({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });
      return eventually(() => received.find((m) => m.id === id && m.method === undefined) ?? false);
    },
    exited,
  };
}

/** The `initialize` request every client sends first. */
export const initializeParams = {
  protocolVersion: '2025-06-18',
  capabilities: {},
  clientInfo: { name: 'raw-json-rpc', version: '1.0.0' },
};

/**
 * Is a process with this pid still running? A zombie is not: it has exited and waits for its
 * parent (for an orphan, pid 1, which may take seconds) to collect its status.
 */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return true; // no /proc to tell a zombie by
  }
}

/** The environment of a bridge run as the secured bus's `agent` user, trusting no issuers. */
export function agentEnv(natsUrl: string): Record<string, string> {
  const { agent } = users;
  return {
    NATS_URL: natsUrl,
    NATS_USER: agent.user,
    NATS_PASSWORD: agent.pass,
    NATS_INBOX_PREFIX: agent.inboxPrefix,
    MATRIX_TRUSTED_ISSUERS: '',
  };
}

/** A `matrix-tools mcp --http` process as the `agent` user of a secured bus. */
export interface HttpBridgeProcess {
  /** Its endpoint, as it said when ready. */
  url: string;
  /** Everything it wrote to stderr so far. */
  log(): string;
  stop(): void;
}

/**
 * Starts `matrix-tools mcp --http --port 0 <args>` on `natsUrl` as the secured bus's `agent` user
 * (test/harness/identity.ts), trusting no issuers; resolves once it says where it listens.
 */
export async function startHttpBridge(natsUrl: string, args: string[]): Promise<HttpBridgeProcess> {
  const child = tracked(
    spawn(process.execPath, [CLI_MAIN, 'mcp', '--http', '--port', '0', ...args], {
      env: { ...process.env, ...agentEnv(natsUrl) },
      stdio: 'pipe',
    }),
  );
  let log = '';
  child.stderr.on('data', (d: Buffer) => (log += d.toString()));
  const url = await eventually(() => /ready on (http:\S+)/.exec(log)?.[1] ?? false, { timeoutMs: 20_000 });
  return { url, log: () => log, stop: () => child.kill('SIGTERM') };
}

/** Resolves after `ms`, or at once when `signal` fires: a fixture op that stops when cancelled. */
export function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
