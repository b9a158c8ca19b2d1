/**
 * Which `Host` and `Origin` the HTTP bridge answers to: its own address and port (every loopback
 * name when it listens on one) and the names it is given; a page of another site (DNS
 * rebinding) is refused before anything else is read.
 */
import type { IncomingMessage } from 'node:http';

/** The loopback names: a bridge on one answers to all of them. */
export const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1']);
/** Addresses that listen on every interface: no `Host` names them. */
export const WILDCARD = new Set(['0.0.0.0', '::', '[::]']);

/** The `Host` values this bridge answers to: its address and port, and every loopback name when it listens on one. */
export function allowedHosts(host: string, port: number, extra: readonly string[]): Set<string> {
  const names = LOOPBACK.has(host) ? ['127.0.0.1', 'localhost', '[::1]'] : [host.includes(':') ? `[${host}]` : host];
  // A name given without a port is this bridge's port; `[v6]` and `name:port` keep theirs.
  const given = extra.map((h) => h.trim().toLowerCase()).map((h) => (/:\d+$/.test(h) ? h : `${h}:${port}`));
  return new Set([...names.filter((n) => !WILDCARD.has(n)).map((n) => `${n}:${port}`), ...given]);
}

/** Why a request whose `Host` or `Origin` names another site is refused (a DNS-rebinding page), or undefined. */
export function originRefusal(req: IncomingMessage, allowed: ReadonlySet<string>): string | undefined {
  const host = req.headers.host?.toLowerCase();
  if (host === undefined || !allowed.has(host)) return `Host ${JSON.stringify(host ?? '')} is not this bridge`;
  const origin = req.headers.origin;
  if (origin === undefined || origin === 'null') return origin === 'null' ? 'an opaque Origin is refused' : undefined;
  let originHost: string;
  try {
    originHost = new URL(origin).host.toLowerCase();
  } catch {
    return `Origin ${JSON.stringify(origin)} is not a URL`;
  }
  return allowed.has(originHost) ? undefined : `Origin ${JSON.stringify(origin)} is not this bridge`;
}
