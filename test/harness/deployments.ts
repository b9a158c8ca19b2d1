/**
 * The two least-privilege deployments a least-privilege test runs on: deploy/nats.conf (static
 * accounts and users with passwords) and operator mode (deploy/operator/make.sh: the same
 * accounts, users and permissions as JWTs signed with nsc, a creds file per user).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ConnectOptions } from '../../src/bus/connect.js';
import { AGENT_MAX_PAYLOAD, deployConf } from './nats-conf.js';
import { NatsVersion, natsTool } from './nats-tools.js';

/** The users both deployments have. */
export type DeployedUser = 'service' | 'operator' | 'weather' | 'agent' | 'agent-2';

/** One deployment: how a server runs it and how each user connects. */
export interface Deployment {
  name: string;
  /** The largest message an agent user may publish, in bytes. */
  agentMaxPayload: number;
  /** The nats-server arguments that run it (JetStream and the port are the harness's). */
  serverArgs(): string[];
  /** How `user` connects: its credentials and its inbox prefix. */
  connect(user: DeployedUser): ConnectOptions;
  /** The `NATS_*` environment of a process that runs as `user`. */
  env(user: DeployedUser): Record<string, string>;
  /** The CLI flags that authenticate as `user` (its inbox prefix included). */
  flags(user: DeployedUser): string[];
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
  serverArgs: () => ['-c', deployConf],
  connect: (user) => ({ user, pass: `${user}-secret`, ...inboxOf(user) }),
  env: (user) => ({ NATS_USER: user, NATS_PASSWORD: `${user}-secret` }),
  flags: (user) => ['--user', user, '--password', `${user}-secret`, ...inboxFlags(user)],
};

const makeScript = fileURLToPath(new URL('../../deploy/operator/make.sh', import.meta.url));
let made: string | undefined;

/** The folder deploy/operator/make.sh wrote (once per test file), with nsc built as the tests name it. */
function operatorDir(): string {
  if (made === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'operator-'));
    execFileSync(makeScript, [join(dir, 'out')], {
      env: { ...process.env, NSC: natsTool('nsc', NatsVersion.nsc) },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    made = join(dir, 'out');
  }
  return made;
}

/** Operator mode, made by deploy/operator/make.sh: each user's `<user>.creds`. */
export const operatorDeployment: Deployment = {
  name: 'operator mode (deploy/operator/make.sh)',
  agentMaxPayload: AGENT_MAX_PAYLOAD,
  serverArgs: () => ['-c', join(operatorDir(), 'server.conf')],
  connect: (user) => ({ credsFile: join(operatorDir(), `${user}.creds`), ...inboxOf(user) }),
  env: (user) => ({ NATS_CREDS: join(operatorDir(), `${user}.creds`) }),
  flags: (user) => ['--creds', join(operatorDir(), `${user}.creds`), ...inboxFlags(user)],
};

/** Both, for `describe.each`. */
export const deployments: readonly Deployment[] = [staticDeployment, operatorDeployment];
