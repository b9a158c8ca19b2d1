/**
 * The ops of a host mount: one per accepted tool (its request is the tool's arguments, which the
 * dispatcher has checked against the tool's schema), and `$accept` for an operator.
 */
import type { AnyOpSpec } from '../../bus/mount.js';
import type { HostReply } from './calls.js';
import type { ServerHost } from './server-host.js';

/**
 * `$accept`'s request: the tools whose held change to accept (all when absent); `digests`, per
 * tool, the digest its held definition must still have (what the operator was shown).
 */
const acceptRequest = {
  type: 'object',
  additionalProperties: false,
  properties: {
    tools: { type: 'array', maxItems: 256, items: { type: 'string', maxLength: 256 } },
    digests: {
      type: 'object',
      maxProperties: 256,
      propertyNames: { maxLength: 256 },
      additionalProperties: { type: 'string', pattern: '^[0-9a-f]{64}$' },
    },
  },
} as const;

/** `$accept`'s reply: the tools whose change was accepted. */
const acceptReply = {
  type: 'object',
  required: ['accepted'],
  properties: { accepted: { type: 'array', items: { type: 'string' } } },
} as const;

/** The ops of `host` for the tool ops `ops`, and `$accept`. */
export function hostOps(host: ServerHost, ops: readonly string[]): Record<string, AnyOpSpec> {
  const specs: Record<string, AnyOpSpec> = {
    $accept: {
      description: 'Accepts held tool definition changes (all, or the named tools); for operators.',
      request: acceptRequest,
      response: acceptReply,
      handle: async (req: { tools?: string[]; digests?: Record<string, string> }, ctx) => ({
        accepted: await host.accept(req.tools, ctx.principal, req.digests),
      }),
    },
  };
  for (const op of ops) {
    const tool = host.toolOfOp(op);
    specs[op] = {
      description: `Calls the MCP tool ${tool.tool}.`,
      request: { type: 'object' },
      response: { type: 'object' },
      handle: (args: Record<string, unknown>, ctx): Promise<HostReply> => host.call(host.toolOfOp(op), args, ctx),
    };
  }
  return specs;
}
