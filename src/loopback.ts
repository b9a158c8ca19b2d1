/**
 * What an HTTP server bound to this machine only answers: requests whose `Host` names it. A page
 * on another site that points its own name at 127.0.0.1 (DNS rebinding) sends its own name as
 * `Host`, and is refused; the console and `/metrics` both check it.
 */

/** Whether an address to bind is this machine only. */
export function isLoopback(host: string): boolean {
  return ['127.0.0.1', 'localhost', '::1'].includes(host);
}

/**
 * `Host` headers a server bound to `host:port` answers: its address and `localhost` when `host`
 * is loopback; undefined (no check) when bound to a public address, whose names it cannot know.
 */
export function loopbackHosts(host: string, port: number): ReadonlySet<string> | undefined {
  if (!isLoopback(host)) return undefined;
  return new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);
}
