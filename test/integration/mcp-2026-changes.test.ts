/**
 * `notifications/tools/list_changed` for MCP 2026-07-28 clients of the HTTP bridge: the SDK 2.x
 * client, pinned to 2026-07-28, opens `subscriptions/listen` with `toolsListChanged` and hears
 * when the tools its grant resolves change, and only then; each notification names the registry
 * revision and tools digest it was read at, as `tools/list` does. Real NATS, a real registry and
 * dispatcher trusting one grant issuer, the bridge in this process.
 */
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintGrant } from '../../src/identity/mint.js';
import { type McpHttpBridge, startMcpHttp } from '../../src/mcp/http.js';
import { DIGEST_META, REVISION_META } from '../../src/mcp/modern.js';
import type { ToolContextSpec } from '../../src/registry/types.js';
import { testConnection } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { searchContext as context, type SearchBus, startSearchBus } from '../harness/search.js';

const REVISION = '2026-07-28';

/** The `_meta` of one `list_changed` a client heard. */
type Heard = Record<string, unknown>;

describe('MCP 2026-07-28 list_changed over subscriptions/listen', () => {
  let bus: SearchBus;
  let bridge: McpHttpBridge;
  const alpha = context('notify-alpha', [['alpha_one', 'The first alpha tool']]);
  const beta = context('notify-beta', [['beta_one', 'The first beta tool']]);
  const open: ModernClient[] = [];

  beforeAll(async () => {
    bus = await startSearchBus([alpha, beta]);
    bridge = await startMcpHttp(await testConnection(), { port: 0, issuers: [bus.issuer.getPublicKey()] });
  }, 30_000);
  afterAll(async () => {
    await Promise.allSettled(open.map((c) => c.close()));
    await bridge?.close();
    await bus?.stop();
  });

  /** A 2026 client with a grant for `refs`, listening for list_changed; what it hears goes into `heard`. */
  const listener = async (refs: string[], session: string) => {
    const grant = mintGrant(bus.issuer, {
      principal: 'agent:ada',
      session,
      resolve: { profile: 'agent', toolContextRefs: refs },
      ttlSeconds: 600,
    });
    const client = new ModernClient(
      { name: session, version: '1.0.0' },
      { versionNegotiation: { mode: { pin: REVISION } } },
    );
    await client.connect(
      new ModernTransport(new URL(bridge.url), { requestInit: { headers: { Authorization: `Bearer ${grant}` } } }),
    );
    open.push(client);
    const heard: Heard[] = [];
    client.setNotificationHandler('notifications/tools/list_changed', (n) => {
      heard.push((n.params?._meta ?? {}) as Heard);
    });
    const subscription = await client.listen({ toolsListChanged: true });
    return { client, heard, subscription };
  };

  /** `spec` with one more tool. */
  const withTool = (spec: ToolContextSpec, name: string): ToolContextSpec => {
    const tools = spec.matrixTools ?? [];
    const first = tools[0];
    if (first === undefined) throw new TypeError(`${spec.key} has no tool to copy`);
    return { ...spec, matrixTools: [...tools, { ...first, name, description: `added ${name}` }] };
  };

  it('tells each subscriber when its own tools change, naming the revision and digest, and no one else', async () => {
    const a = await listener(['notify-alpha'], 's-alpha');
    const b = await listener(['notify-beta'], 's-beta');
    expect(a.subscription.honoredFilter).toEqual({ toolsListChanged: true });
    expect(a.client.getServerCapabilities()?.tools?.listChanged).toBe(true);

    // alpha changes: a hears of it, with the digest its next tools/list carries.
    await bus.instance.registry.register({ spec: withTool(alpha, 'alpha_two') });
    await eventually(() => a.heard.length === 1);
    const relisted = await a.client.listTools();
    expect(relisted.tools.map((t) => t.name).sort()).toEqual(['alpha_one', 'alpha_two']);
    const meta = relisted._meta as Record<string, unknown>;
    expect(a.heard[0]?.[DIGEST_META]).toBe(meta[DIGEST_META]);
    expect(a.heard[0]?.[REVISION_META]).toBe(meta[REVISION_META]);

    // beta changes: b hears of it; then alpha again. One stream is ordered, so once a hears of the
    // second alpha change (its digest names it), a would have heard of beta's before, had it been told.
    const betaChanged = withTool(beta, 'beta_two');
    await bus.instance.registry.register({ spec: betaChanged });
    await eventually(() => b.heard.length === 1);
    await bus.instance.registry.register({ spec: withTool(withTool(alpha, 'alpha_two'), 'alpha_three') });
    const third = await eventually(async () => {
      const got = await a.client.listTools();
      const digest = (got._meta as Record<string, unknown>)[DIGEST_META];
      const current = got.tools.some((t) => t.name === 'alpha_three');
      return current && a.heard.some((h) => h[DIGEST_META] === digest) ? (got._meta as Record<string, unknown>) : false;
    });
    expect(a.heard.map((h) => h[DIGEST_META])).toEqual([meta[DIGEST_META], third[DIGEST_META]]);
    expect(b.heard).toHaveLength(1);
  }, 30_000);

  it('answers a subscription that asks for nothing it serves with an empty filter and ends it', async () => {
    const grant = mintGrant(bus.issuer, {
      principal: 'agent:ada',
      session: 's-none',
      resolve: { profile: 'agent', toolContextRefs: ['notify-alpha'] },
      ttlSeconds: 600,
    });
    const client = new ModernClient(
      { name: 'none', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: REVISION } } },
    );
    await client.connect(
      new ModernTransport(new URL(bridge.url), { requestInit: { headers: { Authorization: `Bearer ${grant}` } } }),
    );
    open.push(client);
    const subscription = await client.listen({ promptsListChanged: true });
    expect(subscription.honoredFilter).toEqual({});
    expect(await subscription.closed).toBe('graceful');
  }, 30_000);
});
