/**
 * What the registry holds of one server (PROTOCOL 12): the context `mcp.<name>` with one
 * projection per accepted tool, approval from the tools' annotations, and the tools left out
 * with the reason (a schema that does not compile, a name that clashes, `hidden`).
 */
import type { ToolAnnotations as McpAnnotations } from '@modelcontextprotocol/sdk/types.js';
import type { MatrixToolProjection, ToolAnnotations, ToolContextSpec } from '../../registry/types.js';
import { registrationError } from '../../registry/validate.js';
import type { ApprovalRule, MatrixSettings } from './config.js';
import { llmNameOf, opOfTool } from './names.js';
import type { Definition, Pin } from './pinning.js';
import type { ServerIdentity } from './upstream.js';

/** Longest description the registry takes (contracts: 8192 characters). */
const MAX_DESCRIPTION = 8_192;
/** Longest instructions the registry takes (contracts: 65536 characters). */
const MAX_INSTRUCTIONS = 65_536;

/** One tool of the server as the host serves it. */
export interface HostedTool {
  /** The MCP name. */
  tool: string;
  /** The LLM-visible name. */
  name: string;
  op: string;
  /** Whether a call waits for a person's approval. */
  gated: boolean;
  pin: Pin;
}

/** The context, the tools in it, and the tools left out with why. */
export interface Projection {
  spec: ToolContextSpec;
  tools: HostedTool[];
  leftOut: Array<{ tool: string; reason: string }>;
}

/** The mount (and context key) of a server. */
export function mountOfServer(name: string): string {
  return `mcp.${name}`;
}

/** Builds the context of `server` from its accepted definitions. */
export function projectServer(
  server: string,
  settings: MatrixSettings,
  identity: ServerIdentity,
  accepted: ReadonlyMap<string, Pin>,
): Projection {
  const key = mountOfServer(server);
  const tools: HostedTool[] = [];
  const leftOut: Projection['leftOut'] = [];
  const names = new Map<string, string>();
  const projections: MatrixToolProjection[] = [];
  for (const [tool, pin] of [...accepted].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (settings.tools[tool]?.hidden === true) {
      leftOut.push({ tool, reason: 'hidden by the host configuration' });
      continue;
    }
    const name = llmNameOf(settings.prefix, tool);
    const clash = names.get(name);
    if (clash !== undefined) {
      leftOut.push({ tool, reason: `its name ${name} is taken by ${clash}` });
      continue;
    }
    const projection = projectionOf(key, name, pin.definition, settings.timeoutMs);
    const error = registrationError(oneToolSpec(key, projection), { prefix: '' });
    if (error !== undefined) {
      leftOut.push({ tool, reason: error.message });
      continue;
    }
    names.set(name, tool);
    projections.push(projection);
    tools.push({ tool, name, op: projection.op, gated: isGated(settings, tool, pin.definition.annotations), pin });
  }
  const gated = tools.filter((t) => t.gated).map((t) => t.name);
  const spec: ToolContextSpec = {
    key,
    title: cut(identity.title ?? identity.name, 200) || key,
    description: cut(`MCP server ${identity.name} ${identity.version}`.trim(), MAX_DESCRIPTION),
    matrixTools: projections,
    permissions: {
      approval: gated.length === 0 ? 'never' : gated.length === tools.length ? 'always' : { tools: gated },
    },
  };
  if (identity.instructions !== undefined && identity.instructions !== '')
    spec.instructions = cut(identity.instructions, MAX_INSTRUCTIONS);
  if (settings.timeoutMs !== undefined) spec.timeoutMs = settings.timeoutMs;
  return { spec, tools, leftOut };
}

/**
 * MCP: a tool without `readOnlyHint: true` may change things, and `destructiveHint` defaults to
 * true. `destructive` gates every tool that is neither read-only nor explicitly non-destructive;
 * a tool's own entry wins over the server's rule.
 */
export function isGated(settings: MatrixSettings, tool: string, annotations: McpAnnotations | undefined): boolean {
  const rule: ApprovalRule = settings.tools[tool]?.approval ?? settings.approval;
  if (rule === 'always') return true;
  if (rule === 'never') return false;
  return !(annotations?.readOnlyHint === true || annotations?.destructiveHint === false);
}

function projectionOf(
  target: string,
  name: string,
  d: Definition,
  timeoutMs: number | undefined,
): MatrixToolProjection {
  const projection: MatrixToolProjection = {
    name,
    description: cut(d.description ?? d.title ?? `The tool ${d.name} of ${target}.`, MAX_DESCRIPTION) || d.name,
    inputSchema: d.inputSchema as MatrixToolProjection['inputSchema'],
    target,
    op: opOfTool(d.name),
    resultMode: 'json',
  };
  if (d.outputSchema !== undefined) projection.outputSchema = d.outputSchema as MatrixToolProjection['outputSchema'];
  const annotations = annotationsOf(d.annotations);
  if (annotations !== undefined) projection.annotations = annotations;
  if (timeoutMs !== undefined) projection.timeoutMs = timeoutMs;
  return projection;
}

/** MCP's hints under the registry's names. */
function annotationsOf(a: McpAnnotations | undefined): ToolAnnotations | undefined {
  if (a === undefined) return undefined;
  const out: ToolAnnotations = {};
  if (typeof a.readOnlyHint === 'boolean') out.readOnly = a.readOnlyHint;
  if (typeof a.destructiveHint === 'boolean') out.destructive = a.destructiveHint;
  if (typeof a.idempotentHint === 'boolean') out.idempotent = a.idempotentHint;
  if (typeof a.openWorldHint === 'boolean') out.openWorld = a.openWorldHint;
  return Object.keys(out).length === 0 ? undefined : out;
}

function oneToolSpec(key: string, projection: MatrixToolProjection): ToolContextSpec {
  return { key, title: key, description: key, matrixTools: [projection], permissions: { approval: 'never' } };
}

function cut(text: string, max: number): string {
  return text.length <= max ? text : text.slice(0, max);
}
