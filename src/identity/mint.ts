/** Making grants and issuer keys: what `matrix-tools grant` and `matrix-tools keys` run. */
import { readFileSync } from 'node:fs';
import { createAccount, fromSeed, type KeyPair } from '@nats-io/nkeys';
import { encodeGrant } from './jwt.js';
import { type ApproveClaim, GRANT_TYPE, type GrantAuthority } from './types.js';

/** What a grant says. */
export interface GrantSpec {
  /** Who acts (`sub`), e.g. `agent:alpha` or `user:ops-ann`. */
  principal: string;
  /** The session id. */
  session: string;
  /** The authority part of the session's `$resolve` request. */
  resolve: GrantAuthority;
  /** How long the grant lives, in seconds. */
  ttlSeconds: number;
  /** Seconds from now before which it is not valid; default valid at once. */
  notBeforeSeconds?: number;
  /** Other sessions whose state `session_state_read` may read. */
  readSessions?: string[];
  /** Which pending approvals the holder may list and answer (`nats.approve`). */
  approve?: ApproveClaim;
  /** The reply prefix of its holder's NATS user (`nats.inbox`, e.g. `_INBOX_agent`): binds its replies to that user. */
  inbox?: string;
  /**
   * Its holder's NATS user (`nats.user`), as nats-server attests it across the agents' account
   * import: binds its requests.
   */
  user?: string;
  /** The account of that user (`nats.account`, e.g. `AGENTS`). */
  account?: string;
  /** The deployment it is for (`aud`), as `MATRIX_GRANT_AUDIENCE` names it. */
  audience?: string;
}

/** Signs a grant with an issuer's key pair. */
export function mintGrant(issuer: KeyPair, spec: GrantSpec, now = Date.now()): string {
  const seconds = Math.floor(now / 1000);
  return encodeGrant(
    {
      sub: spec.principal,
      ...(spec.audience === undefined ? {} : { aud: spec.audience }),
      exp: seconds + spec.ttlSeconds,
      ...(spec.notBeforeSeconds === undefined ? {} : { nbf: seconds + spec.notBeforeSeconds }),
      nats: {
        type: GRANT_TYPE,
        session: spec.session,
        resolve: spec.resolve,
        ...(spec.readSessions === undefined ? {} : { readSessions: spec.readSessions }),
        ...(spec.approve === undefined ? {} : { approve: spec.approve }),
        ...(spec.inbox === undefined ? {} : { inbox: spec.inbox }),
        ...(spec.user === undefined ? {} : { user: spec.user }),
        ...(spec.account === undefined ? {} : { account: spec.account }),
      },
    },
    issuer,
    now,
  );
}

/** A new issuer key (an nkey account key, as `nsc` makes): its seed and its public key. */
export function newIssuerKey(): { seed: string; publicKey: string } {
  const kp = createAccount();
  return { seed: new TextDecoder().decode(kp.getSeed()), publicKey: kp.getPublicKey() };
}

/** The key pair of a seed file (`S…`, as `matrix-tools keys` or `nsc` writes it). */
export function readIssuerSeed(path: string): KeyPair {
  const text = readFileSync(path, 'utf8');
  const seed = /\bS[A-Z2-7]{57}\b/.exec(text)?.[0];
  if (seed === undefined) throw new Error(`${path} holds no nkey seed (a line starting with S, 58 characters)`);
  return fromSeed(new TextEncoder().encode(seed));
}

/** Seconds of a duration: `90`, `90s`, `15m`, `1h`, `7d`. */
export function parseDuration(text: string): number {
  const match = /^(\d+)\s*([smhd]?)$/.exec(text.trim());
  if (match === null) throw new Error(`'${text}' is not a duration (e.g. 90s, 15m, 1h, 7d)`);
  const unit = { '': 1, s: 1, m: 60, h: 3600, d: 86_400 }[match[2] as '' | 's' | 'm' | 'h' | 'd'];
  const seconds = Number(match[1]) * unit;
  if (seconds <= 0) throw new Error(`'${text}' is not a positive duration`);
  return seconds;
}
