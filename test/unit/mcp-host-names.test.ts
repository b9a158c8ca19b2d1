import { describe, expect, it } from 'vitest';
import { parseServers } from '../../src/mcp/host/config.js';
import { llmNameOf, opOfTool, toolOfOp } from '../../src/mcp/host/names.js';
import { isGated } from '../../src/mcp/host/projection.js';

/** `${env:NAME}` as the mcpServers file writes it. */
const envRef = (name: string): string => ['$', '{env:', name, '}'].join('');

const OP = /^\$[A-Za-z][A-Za-z0-9_]*$/;
const NAME = /^[a-zA-Z0-9_-]{1,64}$/;

describe('MCP tool names on the bus', () => {
  const odd = [
    'echo',
    'get-sum',
    'read_file',
    '__double__',
    '_',
    'a.b/c d',
    '名前',
    'emoji 🚀',
    '_5f',
    'x_2d',
    '9lives',
    'A'.repeat(20),
  ];

  it('encodes every name as an op and decodes it back exactly', () => {
    for (const tool of odd) {
      const op = opOfTool(tool);
      expect(op).toMatch(OP);
      expect(toolOfOp(op)).toBe(tool);
    }
  });

  it('keeps names apart that differ only in what the encoding escapes', () => {
    const ops = new Set(['a_b', 'a-b', 'a.b', 'a__b', 'a_5fb', 'a_2db'].map(opOfTool));
    expect(ops.size).toBe(6);
  });

  it('gives a name too long to encode a digest op of its own', () => {
    const long = 'x'.repeat(100);
    expect(opOfTool(long)).toMatch(/^\$h[0-9a-f]{32}$/);
    expect(opOfTool(long)).not.toBe(opOfTool(`${long}y`));
    expect(toolOfOp(opOfTool(long))).toBeUndefined();
  });

  it('refuses ops that are no encoding', () => {
    expect(toolOfOp('$introspect')).toBeUndefined();
    expect(toolOfOp('$t_zz')).toBeUndefined();
    expect(toolOfOp('$t_ff')).toBeUndefined();
  });

  it('maps LLM names into ^[a-zA-Z0-9_-]{1,64}$ deterministically, apart where they differ', () => {
    expect(llmNameOf('fs_', 'read_file')).toBe('fs_read_file');
    for (const tool of [...odd, 'y'.repeat(200)]) {
      const name = llmNameOf('srv_', tool);
      expect(name).toMatch(NAME);
      expect(llmNameOf('srv_', tool)).toBe(name);
    }
    expect(llmNameOf('p_', 'a.b')).not.toBe(llmNameOf('p_', 'a_b'));
    expect(llmNameOf('p_', `${'z'.repeat(70)}1`)).not.toBe(llmNameOf('p_', `${'z'.repeat(70)}2`));
  });
});

describe('the mcpServers file', () => {
  it(`reads stdio and http servers with ${envRef('VAR')} and fills in the defaults`, () => {
    const servers = parseServers(
      {
        mcpServers: {
          fs: { command: 'node', args: [`${envRef('DIR')}/server.js`], env: { TOKEN: `${envRef('SECRET')}` } },
          remote: { url: 'https://example.invalid/mcp', headers: { Authorization: `Bearer ${envRef('SECRET')}` } },
        },
      },
      { DIR: '/opt', SECRET: 's3' },
    );
    expect(servers[0]).toMatchObject({ kind: 'stdio', args: ['/opt/server.js'], env: { TOKEN: 's3' } });
    expect(servers[0]?.matrix).toEqual({ prefix: 'fs_', approval: 'destructive', onChange: 'hold', tools: {} });
    expect(servers[1]).toMatchObject({ kind: 'http', headers: { Authorization: 'Bearer s3' } });
  });

  it('names every mistake with its path and never a value of the environment', () => {
    const bad = () =>
      parseServers(
        {
          mcpServers: {
            'Bad.Name': { command: 'x' },
            both: { command: 'x', url: 'http://h' },
            keys: { command: 'x', matrix: { approval: 'sometimes', nope: 1 }, extra: true },
            unset: { command: `${envRef('NOT_SET_ANYWHERE')}` },
          },
        },
        { SECRET: 'do-not-print' },
      );
    expect(bad).toThrow(/Bad\.Name.*\[a-z0-9_-\]/);
    expect(bad).toThrow(/both: expected either/);
    expect(bad).toThrow(/keys\/matrix\/approval/);
    expect(bad).toThrow(/keys\/matrix\/nope: unknown key/);
    expect(bad).toThrow(/keys\/extra: unknown key/);
    expect(bad).toThrow(/NOT_SET_ANYWHERE\}, which is not set/);
    expect(bad).not.toThrow(/do-not-print/);
    expect(() => parseServers({ servers: {} })).toThrow(/mcpServers/);
  });

  it('reads the OAuth client credentials of a remote server, the secret from the environment', () => {
    const [server] = parseServers(
      {
        mcpServers: {
          tickets: {
            url: 'https://tickets.example/mcp',
            oauth: {
              clientId: 'host-1',
              clientSecret: envRef('TICKETS_SECRET'),
              scope: 'tools:read tools:call',
              issuer: 'https://idp.example/realms/x',
              tokenUrl: 'http://127.0.0.1:8080/token',
            },
          },
          plain: { url: 'https://plain.example/mcp', oauth: { clientId: 'c', clientSecret: envRef('TICKETS_SECRET') } },
        },
      },
      { TICKETS_SECRET: 's3cret' },
    );
    expect(server).toMatchObject({
      kind: 'http',
      oauth: {
        clientId: 'host-1',
        clientSecret: 's3cret',
        scope: 'tools:read tools:call',
        issuer: 'https://idp.example/realms/x',
        tokenUrl: 'http://127.0.0.1:8080/token',
      },
    });
  });

  it('names every mistake of an oauth entry by its path, and never prints the secret', () => {
    const env = { SECRET: 'do-not-print' };
    const problems = (oauth: unknown, extra: Record<string, unknown> = {}) => {
      try {
        parseServers({ mcpServers: { r: { url: 'https://r.example/mcp', oauth, ...extra } } }, env);
      } catch (err) {
        const message = (err as Error).message;
        expect(message).not.toContain('do-not-print');
        return message;
      }
      return 'no error';
    };
    const secret = envRef('SECRET');
    expect(problems('yes')).toMatch(/r\/oauth: expected \{"clientId", "clientSecret"/);
    expect(problems({ clientSecret: secret })).toMatch(/r\/oauth\/clientId: required/);
    expect(problems({ clientId: 'c' })).toMatch(/r\/oauth\/clientSecret: required, as \$\{env:VAR\}/);
    expect(problems({ clientId: 'c', clientSecret: 'literal' })).toMatch(
      /r\/oauth\/clientSecret: write it as \$\{env:VAR\}; a secret is never written in the file/,
    );
    expect(problems({ clientId: 'c', clientSecret: envRef('UNSET_SECRET_VAR') })).toMatch(
      /r\/oauth\/clientSecret: reads \$\{env:UNSET_SECRET_VAR\}, which is not set/,
    );
    expect(problems({ clientId: 7, clientSecret: secret })).toMatch(/r\/oauth\/clientId: expected a non-empty string/);
    expect(problems({ clientId: 'c', clientSecret: secret, scope: 'a  b' })).toMatch(
      /r\/oauth\/scope: expected scope words/,
    );
    expect(problems({ clientId: 'c', clientSecret: secret, issuer: 'http://idp.example' })).toMatch(
      /r\/oauth\/issuer: expected an https URL \(http only on a loopback host\)/,
    );
    expect(problems({ clientId: 'c', clientSecret: secret, tokenUrl: 'not a url' })).toMatch(
      /r\/oauth\/tokenUrl: expected a URL/,
    );
    expect(problems({ clientId: 'c', clientSecret: secret, issuer: 'https://idp.example/#x' })).toMatch(
      /r\/oauth\/issuer: expected a URL without query or fragment/,
    );
    expect(problems({ clientId: 'c', clientSecret: secret, grant: 'password' })).toMatch(
      /r\/oauth\/grant: unknown key/,
    );
    expect(
      problems({ clientId: 'c', clientSecret: secret }, { headers: { authorization: `Bearer ${secret}` } }),
    ).toMatch(/r\/oauth: the host sends its own access token; drop the Authorization header/);
    expect(() =>
      parseServers({ mcpServers: { s: { command: 'x', oauth: { clientId: 'c', clientSecret: secret } } } }, env),
    ).toThrow(/s\/oauth: only a remote server \("url"\) takes OAuth credentials/);
    expect(problems({ clientId: 'c', clientSecret: secret, issuer: 'http://localhost:9/' })).toBe('no error');
  });
});

describe('approval from annotations', () => {
  const settings = parseServers({
    mcpServers: {
      s: { command: 'x', matrix: { tools: { wipe: { approval: 'never' }, peek: { approval: 'always' } } } },
    },
  })[0]?.matrix;
  it('gates all but read-only or explicitly non-destructive tools; per-tool entries win', () => {
    if (settings === undefined) throw new Error('no settings');
    expect(isGated(settings, 'a', undefined)).toBe(true);
    expect(isGated(settings, 'a', { readOnlyHint: false })).toBe(true);
    expect(isGated(settings, 'a', { readOnlyHint: true })).toBe(false);
    expect(isGated(settings, 'a', { destructiveHint: false })).toBe(false);
    expect(isGated(settings, 'wipe', { destructiveHint: true })).toBe(false);
    expect(isGated(settings, 'peek', { readOnlyHint: true })).toBe(true);
    expect(isGated({ ...settings, approval: 'always' }, 'a', { readOnlyHint: true })).toBe(true);
    expect(isGated({ ...settings, approval: 'never' }, 'a', {})).toBe(false);
  });
});
