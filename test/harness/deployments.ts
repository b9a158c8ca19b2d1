/**
 * The two least-privilege deployments a least-privilege test runs on: deploy/nats.conf (static
 * accounts and users with passwords) and operator mode (deploy/operator/make.sh: the same
 * accounts, users and permissions as JWTs signed with nsc, a creds file per user).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ConnectOptions } from '../../src/bus/connect.js';
import { AGENT_MAX_PAYLOAD, confWithMountUsers, deployConf } from './nats-conf.js';
import { NatsVersion, natsTool } from './nats-tools.js';

/** The users both deployments have, and one per mount asked for (named as its mount). */
export type DeployedUser = 'service' | 'operator' | 'weather' | 'agent' | 'agent-2' | (string & {});

/** How a deployment's server is run. */
export interface ServerOptions {
  /** Mounts besides `weather`, each with a user of its own as `weather` has (`app.<name>`). */
  mounts?: readonly string[];
  /** The largest message an agent may publish, in bytes; default `AGENT_MAX_PAYLOAD`. */
  agentMaxPayload?: number;
  /** More server configuration (deploy/nats.conf only). */
  more?: string;
}

/** One deployment: how a server runs it and how each user connects. */
export interface Deployment {
  name: string;
  /** The largest message an agent user may publish, in bytes. */
  agentMaxPayload: number;
  /** The nats-server arguments that run it (JetStream and the port are the harness's). */
  serverArgs(options?: ServerOptions): string[];
  /** How `user` connects: its credentials and its inbox prefix. */
  connect(user: DeployedUser): ConnectOptions;
  /** The `NATS_*` environment of a process that runs as `user`. */
  env(user: DeployedUser): Record<string, string>;
  /** The CLI flags that authenticate as `user` (its inbox prefix included). */
  flags(user: DeployedUser): string[];
  /**
   * How nats-server names `user` of `account` in `Nats-Request-Info`, so how a grant is bound to
   * it (`nats.user`, `nats.account`): by name under nats.conf, by public nkey in operator mode.
   */
  holder(user: DeployedUser, account: 'MATRIX' | 'AGENTS'): { user: string; account: string };
}

const inboxPrefixes: Partial<Record<DeployedUser, string>> = {
  operator: '_INBOX_operator',
  agent: '_INBOX_agent',
  'agent-2': '_INBOX_agent-2',
};

const inboxOf = (user: DeployedUser) => {
  const prefix = inboxPrefixes[user];
  return prefix === undefined ? {} : { inboxPrefix: prefix };
};
const inboxFlags = (user: DeployedUser) => {
  const prefix = inboxPrefixes[user];
  return prefix === undefined ? [] : ['--inbox-prefix', prefix];
};

/** deploy/nats.conf: each user's password is `<user>-secret`. */
export const staticDeployment: Deployment = {
  name: 'deploy/nats.conf',
  agentMaxPayload: AGENT_MAX_PAYLOAD,
  serverArgs: ({ mounts = [], agentMaxPayload = AGENT_MAX_PAYLOAD, more = '' } = {}) => [
    '-c',
    mounts.length === 0 && agentMaxPayload === AGENT_MAX_PAYLOAD && more === ''
      ? deployConf
      : confWithMountUsers(mounts, agentMaxPayload, more),
  ],
  connect: (user) => ({ user, pass: `${user}-secret`, ...inboxOf(user) }),
  env: (user) => ({ NATS_USER: user, NATS_PASSWORD: `${user}-secret` }),
  flags: (user) => ['--user', user, '--password', `${user}-secret`, ...inboxFlags(user)],
  holder: (user, account) => ({ user, account }),
};

const makeScript = fileURLToPath(new URL('../../deploy/operator/make.sh', import.meta.url));
/** The folders deploy/operator/make.sh wrote in this test file, by their mounts and payload limit. */
const made = new Map<string, string>();
/** The mounts an operator deployment has users for: `weather` and those the harness mounts. */
const OPERATOR_MOUNTS = ['weather', 'spy', 'secret'];

/** The folder deploy/operator/make.sh wrote for these settings (once per test file), with nsc as the tests name it. */
function operatorDir(mounts: readonly string[] = [], agentMaxPayload = AGENT_MAX_PAYLOAD): string {
  const all = [...new Set([...OPERATOR_MOUNTS, ...mounts])];
  const key = `${all.join(' ')}/${agentMaxPayload}`;
  let dir = made.get(key);
  if (dir === undefined) {
    dir = join(mkdtempSync(join(tmpdir(), 'operator-')), 'out');
    execFileSync(makeScript, [dir], {
      env: {
        ...process.env,
        NSC: natsTool('nsc', NatsVersion.nsc),
        MOUNTS: all.join(' '),
        AGENT_MAX_PAYLOAD: String(agentMaxPayload),
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    made.set(key, dir);
  }
  return dir;
}

/** The folder of the operator the last server was started with (its users' creds are there). */
let current: string | undefined;
const credsOf = (user: DeployedUser) => join(current ?? operatorDir(), `${user}.creds`);

/** Operator mode, made by deploy/operator/make.sh: each user's `<user>.creds`. */
export const operatorDeployment: Deployment = {
  name: 'operator mode (deploy/operator/make.sh)',
  agentMaxPayload: AGENT_MAX_PAYLOAD,
  serverArgs: ({ mounts, agentMaxPayload, more } = {}) => {
    if (more) throw new Error('the operator deployment takes no more configuration');
    current = operatorDir(mounts, agentMaxPayload);
    return ['-c', join(current, 'server.conf')];
  },
  connect: (user) => ({ credsFile: credsOf(user), ...inboxOf(user) }),
  env: (user) => ({ NATS_CREDS: credsOf(user) }),
  flags: (user) => ['--creds', credsOf(user), ...inboxFlags(user)],
  holder: (user) => {
    // The user JWT in its creds file: its subject is the user's key, its issuer the account's.
    const jwt = /-----BEGIN NATS USER JWT-----\s*(\S+)/.exec(readFileSync(credsOf(user), 'utf8'))?.[1] ?? '';
    const claims = JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString()) as {
      sub: string;
      iss: string;
      nats?: { issuer_account?: string };
    };
    return { user: claims.sub, account: claims.nats?.issuer_account ?? claims.iss };
  },
};

/** Both, for `describe.each`. */
export const deployments: readonly Deployment[] = [staticDeployment, operatorDeployment];
