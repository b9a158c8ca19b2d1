/**
 * `auth-callout`: the NATS auth callout service (PROTOCOL 14, deploy/nats-auth-callout.conf).
 * Connected as the callout's own user, it answers nats-server's authorization requests: a client
 * that connects with an access token of a trusted OpenID Connect issuer becomes a NATS user with
 * the least privilege of the role the claims mapping gives it, until the token expires.
 */
import { readFileSync } from 'node:fs';
import type { NatsConnection } from '@nats-io/nats-core';
import { fromCurveSeed, fromSeed, type KeyPair } from '@nats-io/nkeys';
import type { Command } from 'commander';
import type { BusClient } from '../bus/client.js';
import { connectBus } from '../bus/connect.js';
import { AuthCallout } from '../identity/callout/service.js';
import { loadClaimsMapping } from '../identity/oidc/mapping.js';
import { OidcTrust } from '../identity/oidc/trust.js';
import { RevocationStore, Revocations } from '../identity/revocations.js';
import { DEFAULT_GRANT_MAX_TTL_SECONDS } from '../identity/verify.js';
import {
  addSettings,
  connectConfig,
  type Flags,
  grantMaxTtlSeconds,
  type Setting,
  serveSettings,
  settingValue,
  withConnection,
} from './config.js';
import { ExitCode, type Output, UsageError } from './output.js';
import { interrupted, verbAction } from './run.js';

/** The settings of `auth-callout`: the OIDC trust `serve` has, and the callout's keys. */
export const calloutSettings = {
  trustOidc: serveSettings.trustOidc,
  oidcAudience: serveSettings.oidcAudience,
  oidcMapping: serveSettings.oidcMapping,
  grantMaxTtl: serveSettings.grantMaxTtl,
  issuerSeed: {
    flags: '--issuer-seed <file>',
    env: 'MATRIX_CALLOUT_ISSUER_SEED',
    description:
      "auth-callout: the account nkey seed (SA…) whose public key is auth_callout's issuer; signs its answers",
    defaultText: 'none (required)',
  },
  xkeySeed: {
    flags: '--xkey-seed <file>',
    env: 'MATRIX_CALLOUT_XKEY_SEED',
    description:
      "auth-callout: the curve seed (SX…) whose public key is auth_callout's xkey, when requests are encrypted",
    defaultText: 'none (requests in clear)',
  },
  revocationsUser: {
    flags: '--revocations-user <user>',
    env: 'MATRIX_CALLOUT_REVOCATIONS_USER',
    description:
      "auth-callout: the NATS user, in the service's account, it watches the revocations bucket as: a revoked token cannot connect",
    defaultText: 'none (revocations not checked at connect)',
  },
  revocationsPassword: {
    flags: '--revocations-password <password>',
    env: 'MATRIX_CALLOUT_REVOCATIONS_PASSWORD',
    description: 'auth-callout: the password of --revocations-user',
    defaultText: 'none',
  },
} satisfies Record<string, Setting>;

/** What `auth-callout` runs with, from its flags over the environment. */
export interface CalloutConfig {
  issuers: string[];
  audience: string;
  mapping: string;
  issuerSeed: string;
  xkeySeed?: string;
  /** Longest a token may live (`MATRIX_GRANT_MAX_TTL`, as the service has it), in seconds. */
  maxTtlSeconds: number;
  /** The user and password the revocations are watched as; undefined: not checked at connect. */
  revocations?: { user: string; pass: string };
}

/** The callout's configuration; a usage error naming what is missing. */
export function calloutConfig(flags: Flags, env: NodeJS.ProcessEnv = process.env): CalloutConfig {
  const value = (s: Setting) => settingValue(s, flags, env);
  const s = calloutSettings;
  const text = (setting: Setting, why: string): string => {
    const v = value(setting);
    if (typeof v !== 'string' || v.trim() === '')
      throw new UsageError(`auth-callout needs ${setting.flags?.split(' ')[0]} (${setting.env}): ${why}`);
    return v.trim();
  };
  const config: CalloutConfig = {
    issuers: text(s.trustOidc, 'the issuers whose tokens it takes')
      .split(',')
      .map((i) => i.trim())
      .filter((i) => i !== ''),
    audience: text(s.oidcAudience, 'the resource its tokens must name'),
    mapping: text(s.oidcMapping, "how a token's claims give a role"),
    issuerSeed: text(s.issuerSeed, "the seed of auth_callout's issuer"),
    maxTtlSeconds: grantMaxTtlSeconds(value(s.grantMaxTtl)) ?? DEFAULT_GRANT_MAX_TTL_SECONDS,
  };
  const xkey = value(s.xkeySeed);
  if (typeof xkey === 'string' && xkey !== '') config.xkeySeed = xkey;
  const user = value(s.revocationsUser);
  if (typeof user === 'string' && user !== '')
    config.revocations = { user, pass: text(s.revocationsPassword, "the password of the revocations' user") };
  return config;
}

/** A seed file's key pair; a usage error when it holds no seed of `kind`. */
function seedFile(path: string, kind: 'account' | 'curve'): KeyPair {
  let seed: Uint8Array;
  try {
    seed = new TextEncoder().encode(readFileSync(path, 'utf8').trim());
  } catch (err) {
    throw new UsageError(`cannot read the ${kind} seed ${path}: ${(err as Error).message}`);
  }
  try {
    const kp = kind === 'curve' ? fromCurveSeed(seed) : fromSeed(seed);
    if (kind === 'account' && !kp.getPublicKey().startsWith('A')) throw new Error('not an account seed (SA…)');
    return kp;
  } catch (err) {
    throw new UsageError(`${path} holds no ${kind} seed: ${(err as Error).message}`);
  }
}

/** Runs the callout until SIGINT/SIGTERM. */
export async function runAuthCallout(client: BusClient, args: Flags, out: Output): Promise<number> {
  const config = calloutConfig(args);
  let trust: OidcTrust;
  try {
    trust = new OidcTrust({
      issuers: config.issuers,
      audience: config.audience,
      mapping: loadClaimsMapping(config.mapping),
    });
  } catch (err) {
    throw new UsageError(`--trust-oidc: ${(err as Error).message}`);
  }
  const issuer = seedFile(config.issuerSeed, 'account');
  const xkey = config.xkeySeed === undefined ? undefined : seedFile(config.xkeySeed, 'curve');
  for (const failure of await trust.start()) out.note(`warning: ${failure}`);
  const revocations = new Revocations();
  const watching =
    config.revocations === undefined
      ? undefined
      : await watchRevocations(args, config.revocations, config.maxTtlSeconds, revocations, (line) => out.note(line));
  const callout = new AuthCallout(client.nc, {
    trust,
    issuer,
    maxTtlSeconds: config.maxTtlSeconds,
    ...(xkey !== undefined && { xkey }),
    ...(watching !== undefined && { revocations }),
    onDecision: (d) =>
      out.note(
        d.allowed
          ? `auth-callout: ${d.principal} connected as ${d.role} in ${d.account} until ${new Date(d.expiresAt).toISOString()}`
          : `auth-callout: refused: ${d.reason}`,
      ),
  }).start();
  await client.nc.flush();
  out.note(
    `auth-callout ready (issuer ${issuer.getPublicKey()}${xkey ? `, xkey ${xkey.getPublicKey()}` : ''}; trusting ${config.issuers.join(', ')}; ${watching ? `revocations watched as ${config.revocations?.user}` : 'revocations not checked at connect'})`,
  );
  await interrupted();
  await callout.stop();
  trust.stop();
  await watching?.stop();
  return ExitCode.Ok;
}

/** How long the callout waits at start for the service to have made the revocations bucket, in ms. */
const BUCKET_WAIT_MS = 30_000;

/**
 * Watches the service's revocations bucket into `into` over a connection of its own, as a user
 * of the service's account (the callout's own account holds no JetStream); resolves once the
 * revocations stored so far are known. Fails (the callout does not start) when the bucket cannot
 * be read within 30 s: asked to check revocations, it never lets a revoked token connect.
 */
async function watchRevocations(
  args: Flags,
  as: { user: string; pass: string },
  maxTtlSeconds: number,
  into: Revocations,
  note: (line: string) => void,
): Promise<{ stop(): Promise<void> }> {
  const { servers } = connectConfig(args);
  const nc: NatsConnection = await connectBus({
    ...(servers === undefined ? {} : { servers }),
    user: as.user,
    pass: as.pass,
    inboxPrefix: `_INBOX_${as.user}`,
    name: 'matrix-tools-auth-callout-revocations',
  });
  const deadline = Date.now() + BUCKET_WAIT_MS;
  let store: RevocationStore | undefined;
  while (store === undefined) {
    try {
      store = await RevocationStore.bind(nc, { maxAgeMs: maxTtlSeconds * 1000 });
    } catch (err) {
      if (Date.now() >= deadline) {
        await nc.close();
        throw new Error(`revocations: ${(err as Error).message} (is the service running?)`);
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
  const watch = store.watch(into, (err) => note(`warning: revocations: ${(err as Error).message}`));
  await watch.caughtUp;
  return {
    stop: async () => {
      watch.stop();
      await nc.close();
    },
  };
}

/** Declares `auth-callout`. */
export function addAuthCalloutCommand(program: Command): void {
  addSettings(
    withConnection(
      program
        .command('auth-callout')
        .description(
          'answer NATS auth callout: a client connecting with an IdP access token gets its role’s least privilege',
        ),
    ),
    calloutSettings,
  ).action(verbAction(runAuthCallout));
}
