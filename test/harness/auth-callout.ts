/**
 * A bus as deploy/nats-auth-callout.conf runs it: nats-server (≥ 2.10) with no agent, approver
 * or operator in its config, `matrix-tools auth-callout` answering its authorization requests as
 * user `auth`, the service as `service` trusting the same OIDC issuer, and a real IdP whose
 * clients' tokens map to each role. Connections by token, with the inbox prefix of the role.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NatsConnection } from '@nats-io/nats-core';
import { createAccount, createCurve } from '@nats-io/nkeys';
import { connect } from '@nats-io/transport-node';
import { decodeJwt } from 'jose';
import { roleUser } from '../../src/identity/callout/roles.js';
import type { NatsRole } from '../../src/identity/oidc/mapping.js';
import { type ProcessNats, startNatsProcess } from './nats-server.js';
import { NatsVersion, natsTool } from './nats-tools.js';
import { startIdp, type TestClient, type TestIdp } from './oidc.js';
import { type ServiceProcess, startScript } from './service.js';

/** The shipped auth-callout configuration. */
export const calloutConf = fileURLToPath(new URL('../../deploy/nats-auth-callout.conf', import.meta.url));

/** The resource the tokens are for (the service's and the callout's audience). */
export const BUS_RESOURCE = 'https://bus.example/';

/** The IdP's clients: one per role, one the mapping does not know. */
export const calloutClients = {
  agent: { id: 'agent-one', claims: { groups: ['agents'] } },
  approver: { id: 'approver-one', claims: { groups: ['approvers'] } },
  operator: { id: 'operator-one', claims: { groups: ['operators'] } },
  host: { id: 'host-one', claims: { groups: ['hosts'] } },
  stranger: { id: 'stranger', claims: { groups: ['visitors'] } },
} as const;

/** The claims mapping: groups → role, principal `agent:<client_id>`. */
export const calloutMapping = {
  principal: { claim: 'client_id', prefix: 'agent:' },
  rules: [
    { when: { groups: 'agents' }, profile: 'default', role: 'agent' },
    { when: { groups: 'approvers' }, profile: 'default', role: 'approver', approve: { tools: ['*'] } },
    { when: { groups: 'operators' }, profile: 'default', role: 'operator' },
    { when: { groups: 'hosts' }, profile: 'default', role: 'host' },
  ],
};

/** The running setup. */
export interface CalloutBus {
  server: ProcessNats;
  idp: TestIdp;
  service: ServiceProcess;
  callout: ServiceProcess;
  /** Passwords of the static users. */
  passwords: { auth: string; service: string; weather: string; revocations: string };
  /** A token of the IdP for the client of `who`. */
  token(who: keyof typeof calloutClients, options?: { resource?: string }): Promise<string>;
  /** Connects with `token` (as the token, or as the password) and the inbox prefix of `role`; no reconnect. */
  connect(token: string, role?: NatsRole, as?: 'token' | 'password'): Promise<NatsConnection>;
  stop(): Promise<void>;
}

/** Starts the setup; `xkey` has nats-server encrypt its requests to the callout. */
export async function startCalloutBus(
  options: {
    xkey?: boolean;
    ttlSeconds?: number;
    /** Another claims mapping than `calloutMapping`. */
    mapping?: object;
    /** More clients of the IdP, beside `calloutClients` (their tokens by `idp.token(id)`). */
    extraClients?: TestClient[];
  } = {},
): Promise<CalloutBus> {
  const dir = mkdtempSync(join(tmpdir(), 'callout-'));
  const idp = await startIdp({
    resources: [BUS_RESOURCE, 'https://other.example/'],
    clients: [
      ...Object.values(calloutClients).map((c) => ({ id: c.id, claims: c.claims })),
      ...(options.extraClients ?? []),
    ],
    ...(options.ttlSeconds !== undefined && { ttlSeconds: options.ttlSeconds }),
  });
  const issuer = createAccount();
  const issuerSeed = join(dir, 'issuer.nk');
  writeFileSync(issuerSeed, issuer.getSeed());
  const mapping = join(dir, 'mapping.json');
  writeFileSync(mapping, JSON.stringify(options.mapping ?? calloutMapping));
  let conf = calloutConf;
  const calloutEnv: Record<string, string> = {};
  if (options.xkey) {
    const xkey = createCurve();
    const xkeySeed = join(dir, 'xkey.nk');
    writeFileSync(xkeySeed, xkey.getSeed());
    calloutEnv.MATRIX_CALLOUT_XKEY_SEED = xkeySeed;
    conf = join(dir, 'nats.conf');
    writeFileSync(
      conf,
      readFileSync(calloutConf, 'utf8').replace('account: AUTH\n', `account: AUTH\n    xkey: ${xkey.getPublicKey()}\n`),
    );
  }
  const passwords = { auth: 'auth-pw', service: 'service-pw', weather: 'weather-pw', revocations: 'revocations-pw' };
  // Auth callout needs nats-server 2.10 or newer: the one NATS_SERVER_BIN names, else the newest
  // release built by scripts/nats.sh (Debian's, first on PATH, is 2.9).
  const server = await startNatsProcess(['-c', conf], {
    bin: process.env.NATS_SERVER_BIN ?? natsTool('server', NatsVersion.newest),
    env: {
      MATRIX_CALLOUT_ISSUER: issuer.getPublicKey(),
      MATRIX_CALLOUT_PASSWORD: passwords.auth,
      MATRIX_SERVICE_PASSWORD: passwords.service,
      MATRIX_WEATHER_PASSWORD: passwords.weather,
      MATRIX_REVOCATIONS_PASSWORD: passwords.revocations,
    },
  });
  const oidcEnv = {
    MATRIX_TRUSTED_OIDC_ISSUERS: idp.issuer,
    MATRIX_OIDC_AUDIENCE: BUS_RESOURCE,
    MATRIX_OIDC_MAPPING: mapping,
  };
  // The service first: it makes the revocations bucket the callout watches.
  const service = await startScript(
    'dist/src/cli/main.js',
    server.url,
    ' ready ',
    { NATS_USER: 'service', NATS_PASSWORD: passwords.service, ...oidcEnv },
    ['serve'],
  );
  const callout = await startScript(
    'dist/src/cli/main.js',
    server.url,
    'auth-callout ready',
    {
      NATS_USER: 'auth',
      NATS_PASSWORD: passwords.auth,
      MATRIX_CALLOUT_ISSUER_SEED: issuerSeed,
      MATRIX_CALLOUT_REVOCATIONS_USER: 'revocations',
      MATRIX_CALLOUT_REVOCATIONS_PASSWORD: passwords.revocations,
      ...calloutEnv,
      ...oidcEnv,
    },
    ['auth-callout'],
  );
  const opened: NatsConnection[] = [];
  return {
    server,
    idp,
    service,
    callout,
    passwords,
    token: (who, asked = {}) => idp.token(calloutClients[who].id, asked),
    connect: async (token, role = 'agent', as = 'token') => {
      const principal = `agent:${clientOf(token)}`;
      const nc = await connect({
        servers: server.url,
        ...(as === 'token' ? { token } : { user: principal, pass: token }),
        inboxPrefix: roleUser(role, principal).inboxPrefix,
        reconnect: false,
        name: `test-${role}`,
      });
      opened.push(nc);
      return nc;
    },
    stop: async () => {
      for (const nc of opened) if (!nc.isClosed()) await nc.close();
      await service.stop('SIGTERM');
      await callout.stop('SIGTERM');
      await server.stop();
      await idp.stop();
    },
  };
}

/** The token's client_id, or `unknown` for what is no JWT (a connection that must be refused). */
function clientOf(token: string): string {
  try {
    return String(decodeJwt(token).client_id);
  } catch {
    return 'unknown';
  }
}
