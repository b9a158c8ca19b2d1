/** `mcp --http --oauth-issuer`: the HTTP bridge as an OAuth 2.1 protected resource, until SIGINT or SIGTERM. */
import type { NatsConnection } from '@nats-io/nats-core';
import { interrupted } from '../cli/run.js';
import { type McpHttpOptions, startMcpHttp } from './http.js';
import type { OAuthResource } from './oauth-resource.js';

/** Serves until SIGINT or SIGTERM, saying what it trusts. */
export async function serveMcpOAuth(
  nc: NatsConnection,
  options: McpHttpOptions & { oauth: OAuthResource },
): Promise<void> {
  const bridge = await startMcpHttp(nc, options);
  const { oauth } = options;
  process.stderr.write(
    `mcp bridge: ready on ${bridge.url} (OAuth: access tokens of ${oauth.issuers.join(', ')} for ${oauth.resource}; metadata at ${oauth.metadataUrl})\n`,
  );
  const signal = await interrupted();
  process.stderr.write(`mcp bridge: ${signal}; closing ${bridge.sessions()} session(s)\n`);
  await bridge.close();
  oauth.stop();
}
