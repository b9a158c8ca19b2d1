/**
 * The flags of `mcp --http` that make the endpoint an OAuth 2.1 protected resource (PROTOCOL 14,
 * docs/mcp-oauth.md), and the `OAuthResource` they describe.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { type Command, Option } from 'commander';
import { loadClaimsMapping } from '../identity/oidc/mapping.js';
import { OAuthResource } from '../mcp/oauth-resource.js';
import { UsageError } from './output.js';

/** The OAuth flags, as commander parses them. */
export interface McpOAuthFlags {
  oauthIssuer?: string;
  oauthAudience?: string;
  oauthScopes?: string;
  oidcMapping?: string;
}

/** Adds the OAuth flags to `mcp`. */
export function withOAuthFlags(cmd: Command): Command {
  return cmd
    .addOption(
      new Option(
        '--oauth-issuer <url>',
        'with --http: an OAuth 2.1 protected resource; each session is an access token of this issuer (env: MATRIX_MCP_OAUTH_ISSUER)',
      ).env('MATRIX_MCP_OAUTH_ISSUER'),
    )
    .addOption(
      new Option(
        '--oauth-audience <url>',
        "with --oauth-issuer: this resource's identifier, a token's aud (env: MATRIX_MCP_OAUTH_AUDIENCE; default: http://<host>:<port>/mcp)",
      ).env('MATRIX_MCP_OAUTH_AUDIENCE'),
    )
    .addOption(
      new Option(
        '--oauth-scopes <scopes>',
        'with --oauth-issuer: scopes every token must carry, space- or comma-separated (env: MATRIX_MCP_OAUTH_SCOPES; default: none)',
      ).env('MATRIX_MCP_OAUTH_SCOPES'),
    )
    .addOption(
      new Option(
        '--oidc-mapping <file>',
        'with --oauth-issuer: the claims mapping, claims → principal, session, profile, refs (env: MATRIX_OIDC_MAPPING)',
      ).env('MATRIX_OIDC_MAPPING'),
    );
}

/**
 * The protected resource the flags describe, its keys fetched and the revocations watched; undefined
 * without `--oauth-issuer`. Problems it can live with go to `warn`.
 */
export async function oauthResourceOf(
  flags: McpOAuthFlags,
  where: { host: string; port: number; path: string },
  nc: NatsConnection,
  warn: (line: string) => void,
): Promise<OAuthResource | undefined> {
  if (flags.oauthIssuer === undefined || flags.oauthIssuer === '') {
    if (flags.oauthAudience !== undefined || flags.oauthScopes !== undefined)
      throw new UsageError('--oauth-audience and --oauth-scopes go with --oauth-issuer');
    return undefined;
  }
  if (flags.oidcMapping === undefined || flags.oidcMapping === '')
    throw new UsageError('--oauth-issuer needs --oidc-mapping (MATRIX_OIDC_MAPPING): how a token becomes a session');
  if (flags.oauthAudience === undefined && where.port === 0)
    throw new UsageError('--oauth-issuer with --port 0 needs --oauth-audience: the resource tokens must name');
  const host = where.host.includes(':') ? `[${where.host}]` : where.host;
  let resource: OAuthResource;
  try {
    resource = new OAuthResource({
      issuer: flags.oauthIssuer,
      resource: flags.oauthAudience ?? `http://${host}:${where.port}${where.path}`,
      mapping: loadClaimsMapping(flags.oidcMapping),
      scopes: (flags.oauthScopes ?? '').split(/[\s,]+/).filter((s) => s !== ''),
    });
  } catch (err) {
    throw new UsageError(`--oauth-issuer: ${(err as Error).message}`);
  }
  for (const failure of await resource.start(nc)) warn(failure);
  return resource;
}
