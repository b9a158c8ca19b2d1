/**
 * Where the MCP endpoint's Protected Resource Metadata is, as its challenge names it (RFC 9728
 * section 3.1: the well-known prefix before the resource's path), and what the document says.
 */
import { describe, expect, it } from 'vitest';
import { OAuthResource } from '../../src/mcp/oauth-resource.js';

const of = (resource: string, scopes?: string[]) =>
  new OAuthResource({
    issuer: 'https://idp.example.com',
    resource,
    mapping: { rules: [{ profile: 'default' }] },
    ...(scopes !== undefined && { scopes }),
  });

describe('the Protected Resource Metadata of the MCP endpoint', () => {
  it('is at the well-known prefix before the resource path, without its trailing slash', () => {
    expect(of('https://tools.example.com/mcp').metadataUrl).toBe(
      'https://tools.example.com/.well-known/oauth-protected-resource/mcp',
    );
    expect(of('https://tools.example.com/').metadataUrl).toBe(
      'https://tools.example.com/.well-known/oauth-protected-resource',
    );
    expect(of('https://tools.example.com:8443/a/mcp/').metadataUrl).toBe(
      'https://tools.example.com:8443/.well-known/oauth-protected-resource/a/mcp',
    );
  });

  it('names the resource, its one authorization server, header bearer tokens and the scopes only when required', () => {
    expect(of('https://tools.example.com/mcp').metadata()).toEqual({
      resource: 'https://tools.example.com/mcp',
      authorization_servers: ['https://idp.example.com'],
      bearer_methods_supported: ['header'],
      resource_name: 'matrix-tools MCP bridge',
    });
    expect(of('https://tools.example.com/mcp', ['tools']).metadata()).toMatchObject({ scopes_supported: ['tools'] });
  });

  it('refuses a resource with a fragment (RFC 8707) and one that is no URL', () => {
    expect(() => of('https://tools.example.com/mcp#x')).toThrow(/fragment/);
    expect(() => of('tools')).toThrow();
  });
});
