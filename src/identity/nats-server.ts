/**
 * What the nats-server a request came through can guarantee (PROTOCOL 16). Holder binding by
 * `nats.user` trusts the `Nats-Request-Info` the server attests; a server without the fixes for
 * CVE-2026-33223 (incomplete stripping: any authenticated client could forge that header) and
 * CVE-2026-33246 (forged across leaf nodes) cannot guarantee it, so such a grant is refused there
 * unless the service runs with `--allow-unsafe-nats`.
 */

/** The advisory a refusal on an affected server names. */
export const REQUEST_INFO_CVE = 'CVE-2026-33223';

/** The advisories a server must have fixed for `Nats-Request-Info` to be trusted. */
export const REQUEST_INFO_CVES = `${REQUEST_INFO_CVE} and CVE-2026-33246`;

/**
 * The first release of each line with both fixes (2.11.15, 2.12.6); every line from 2.13 on has
 * them from its first release, every line before 2.11 none.
 */
const FIXED_IN: Readonly<Record<string, number>> = { '2.11': 15, '2.12': 6 };

/** The oldest supported line (docs/nats-servers.md): CI runs the integration tier on its newest patch. */
export const OLDEST_SUPPORTED_LINE = { major: 2, minor: 14 } as const;

/** What a grant bound by `nats.user` meets on the connected server (`$introspect`'s `natsServer.holderBinding`). */
export const HolderBinding = {
  /** The server has both fixes: the grant holds for its holder only. */
  Trusted: 'trusted',
  /** The server lacks a fix (or says no version): the grant is refused, `forbidden`. */
  Refused: 'refused',
  /** The server lacks a fix, and the service runs with `--allow-unsafe-nats`: the grant is served anyway. */
  Unsafe: 'unsafe',
} as const;
export type HolderBinding = (typeof HolderBinding)[keyof typeof HolderBinding];

/** The connected server as `$introspect` reports it (`natsServer`). */
export interface NatsServerReport {
  /** The version its INFO gives; `unknown` when it gives none. */
  version: string;
  /** Of a supported line (2.14 or newer)? */
  supported: boolean;
  /** What a grant bound by `nats.user` meets there. */
  holderBinding: HolderBinding;
}

interface Release {
  major: number;
  minor: number;
  patch: number;
  /** `-rc.1`, `-beta`: a pre-release, which precedes its release. */
  pre: boolean;
}

function release(version: string | undefined): Release | undefined {
  const m = /^v?(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?(\+.*)?$/.exec(version ?? '');
  if (m === null) return undefined;
  return { major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3]), pre: m[4] !== undefined };
}

/**
 * Has a server of `version` (as its INFO says it) both fixes? False for a version it cannot read:
 * what cannot be known to be fixed is not trusted. A pre-release of the fixing patch counts as before it.
 */
export function requestInfoFixed(version: string | undefined): boolean {
  const r = release(version);
  if (r === undefined) return false;
  if (r.major !== 2) return r.major > 2;
  if (r.minor >= 13) return true;
  const first = FIXED_IN[`${r.major}.${r.minor}`];
  if (first === undefined) return false;
  return r.patch > first || (r.patch === first && !r.pre);
}

/** Is `version` of a supported line (2.14 and newer)? */
export function supportedServer(version: string | undefined): boolean {
  const r = release(version);
  if (r === undefined) return false;
  return r.major > OLDEST_SUPPORTED_LINE.major || (r.major === 2 && r.minor >= OLDEST_SUPPORTED_LINE.minor);
}

/** What a grant bound by `nats.user` meets on a server of `version`, with or without `--allow-unsafe-nats`. */
export function holderBindingOn(version: string | undefined, allowUnsafe: boolean): HolderBinding {
  if (requestInfoFixed(version)) return HolderBinding.Trusted;
  return allowUnsafe ? HolderBinding.Unsafe : HolderBinding.Refused;
}

/** The `natsServer` of `$introspect`. */
export function natsServerReport(version: string | undefined, allowUnsafe: boolean): NatsServerReport {
  return {
    version: version ?? 'unknown',
    supported: supportedServer(version),
    holderBinding: holderBindingOn(version, allowUnsafe),
  };
}

/** One sentence on the server, for `serve`'s ready line and its reconnect lines. */
export function describeServer(version: string | undefined, allowUnsafe: boolean): string {
  const shown = `nats-server ${version ?? '(no version)'}`;
  const unsupported = supportedServer(version) ? '' : ' (unsupported: older than 2.14, see docs/nats-servers.md)';
  switch (holderBindingOn(version, allowUnsafe)) {
    case HolderBinding.Trusted:
      return `${shown}${unsupported}: grants bound by nats.user are checked against Nats-Request-Info`;
    case HolderBinding.Unsafe:
      return `${shown}${unsupported} lacks the fixes for ${REQUEST_INFO_CVES}: grants bound by nats.user are served anyway (--allow-unsafe-nats), though any client could forge their holder`;
    default:
      return `${shown}${unsupported} lacks the fixes for ${REQUEST_INFO_CVES}: grants bound by nats.user are refused (--allow-unsafe-nats serves them anyway)`;
  }
}
