/**
 * Merging the selected contexts into one (PROTOCOL 5.2): tools deduplicated by name (the same
 * projection once, gated if any context gates it; a different one under a taken name loses,
 * with a diagnostic), SDK tools, instructions under each title, the smallest timeout, and the
 * unions of environment requirements and verification.
 */
import { ConflictError } from '../bus/errors.js';
import { canonicalJson } from './canonical.js';
import type {
  Diagnostic,
  EnvironmentRequirements,
  MatrixToolProjection,
  ResolvedTool,
  ResolvedToolContext,
  ToolContextSpec,
  Verification,
} from './types.js';

/**
 * What the merged contexts give: the reply's fields of that name (`timeoutMs` Infinity when no
 * context or tool sets one).
 */
export type Merged = Pick<
  ResolvedToolContext,
  'matrixTools' | 'sdkTools' | 'instructions' | 'timeoutMs' | 'environmentRequirements' | 'verification'
>;

/**
 * Merges contexts one at a time, in selection order; what it drops goes to `diagnostics`. A bus
 * tool and an SDK tool of one name is an error: the model could not tell which one it calls, and
 * what it meant for its own worker would reach a mount.
 */
export class ContextMerge {
  private readonly tools: ResolvedTool[] = [];
  // Each tool's canonical text is made only when a second tool of its name comes (rarely).
  private readonly byName = new Map<
    string,
    { tool: ResolvedTool; projection: MatrixToolProjection; at: number; canonical?: string }
  >();
  private readonly sdkTools: string[] = [];
  /** Which context listed each SDK tool first. */
  private readonly sdkToolContexts = new Map<string, string>();
  private readonly instructions: string[] = [];
  private timeoutMs = Number.POSITIVE_INFINITY;
  private readonly requirements = new RequirementsUnion();
  private readonly verification = new VerificationUnion();

  /**
   * @param diagnostics where each tool left out or conflicting is reported.
   * @param isLive given, a tool whose target has no live instance is left out (`onlyAvailable`).
   */
  constructor(
    private readonly diagnostics: Diagnostic[],
    private readonly isLive?: (mount: string) => boolean,
  ) {}

  /** Adds one context. */
  add(spec: ToolContextSpec): void {
    if (spec.timeoutMs !== undefined) this.timeoutMs = Math.min(this.timeoutMs, spec.timeoutMs);
    if (spec.instructions?.trim()) this.instructions.push(`## ${spec.title}\n\n${spec.instructions.trim()}`);
    this.requirements.add(spec.environmentRequirements);
    this.verification.add(spec.verification);
    const tools = resolvedTools(spec);
    for (const [i, projection] of (spec.matrixTools ?? []).entries())
      this.addTool(projection, spec, tools[i] as ResolvedTool);
    for (const name of spec.sdkTools ?? []) this.addSdkTool(name, spec.key);
  }

  /** What the contexts added so far give. */
  result(): Merged {
    return {
      matrixTools: this.tools,
      sdkTools: this.sdkTools,
      instructions: this.instructions.join('\n\n'),
      timeoutMs: this.timeoutMs,
      environmentRequirements: this.requirements.value(),
      verification: this.verification.value(),
    };
  }

  private addTool(projection: MatrixToolProjection, spec: ToolContextSpec, tool: ResolvedTool): void {
    if (this.isLive !== undefined && !this.isLive(projection.target)) {
      this.warn(
        'target_unavailable',
        `tool '${projection.name}' of context '${spec.key}' left out: ${projection.target} has no live instance`,
        spec.key,
        projection.name,
      );
      return;
    }
    const sdkContext = this.sdkToolContexts.get(tool.name);
    if (sdkContext !== undefined) throw busSdkCollision(tool.name, spec.key, sdkContext);
    const held = this.byName.get(tool.name);
    if (held === undefined) {
      this.byName.set(tool.name, { tool, projection, at: this.tools.length });
      this.tools.push(tool);
      if (tool.timeoutMs !== undefined) this.timeoutMs = Math.min(this.timeoutMs, tool.timeoutMs);
    } else if (
      (held.canonical ??= canonicalProjection(held.projection, held.tool)) === canonicalProjection(projection, tool)
    ) {
      // The same projection from two contexts: one tool, gated if either context gates it (a
      // copy: the resolved tools of a context are shared by every resolution that merges it).
      if (tool.requiresApproval && !held.tool.requiresApproval) {
        held.tool = { ...held.tool, requiresApproval: true };
        this.tools[held.at] = held.tool;
      }
    } else {
      const kept = held.tool;
      this.warn(
        'tool_name_conflict',
        `tool '${tool.name}' of context '${spec.key}' (${tool.target} ${tool.op}) differs from the one of context '${kept.context}' (${kept.target} ${kept.op}); the first, from '${kept.context}', is kept`,
        spec.key,
        tool.name,
      );
    }
  }

  private addSdkTool(name: string, context: string): void {
    const bus = this.byName.get(name);
    if (bus !== undefined) throw busSdkCollision(name, bus.tool.context, context);
    if (!this.sdkToolContexts.has(name)) {
      this.sdkToolContexts.set(name, context);
      this.sdkTools.push(name);
    }
  }

  private warn(code: string, message: string, context: string, tool: string): void {
    this.diagnostics.push({ level: 'warning', code, message, context, tool });
  }
}

function busSdkCollision(name: string, busContext: string, sdkContext: string): ConflictError {
  return new ConflictError(
    `tool '${name}' is a bus tool of context '${busContext}' and an SDK tool of context '${sdkContext}': a session cannot hold both; leave one of the contexts out`,
    { details: { tool: name, busContext, sdkContext } },
  );
}

/** What makes two projections of one name the same tool: the projection, its result mode defaulted. */
function canonicalProjection(projection: MatrixToolProjection, tool: ResolvedTool): string {
  return canonicalJson({ ...projection, resultMode: tool.resultMode });
}

/**
 * A context's tools as every resolution merges them, made once per spec (a stored spec does not
 * change; a new revision is a new object) and frozen; each one's canonical text is made once as
 * well, on the first digest that holds it (`''` until then).
 */
const resolvedBySpec = new WeakMap<ToolContextSpec, readonly ResolvedTool[]>();
const sharedTexts = new WeakMap<object, string>();

function resolvedTools(spec: ToolContextSpec): readonly ResolvedTool[] {
  let tools = resolvedBySpec.get(spec);
  if (tools === undefined) {
    tools = (spec.matrixTools ?? []).map((projection) => Object.freeze(resolvedTool(projection, spec)));
    for (const tool of tools) sharedTexts.set(tool, '');
    resolvedBySpec.set(spec, tools);
  }
  return tools;
}

/** The canonical text of a shared resolved tool (`canonicalJson`'s `known`); `undefined` for any other value. */
export function knownToolText(value: object): string | undefined {
  const text = sharedTexts.get(value);
  if (text !== '') return text;
  // Flat, not a rope of appends: every digest that holds it reads it whole.
  const made = flat(canonicalJson(value));
  sharedTexts.set(value, made);
  return made;
}

function resolvedTool(projection: MatrixToolProjection, spec: ToolContextSpec): ResolvedTool {
  const approval = spec.permissions.approval;
  const requiresApproval =
    approval === 'always' || (typeof approval === 'object' && approval.tools.includes(projection.name));
  const tool: ResolvedTool = {
    ...projection,
    resultMode: projection.resultMode ?? 'json',
    requiresApproval,
    context: spec.key,
  };
  const timeoutMs = Math.min(projection.timeoutMs ?? Infinity, spec.timeoutMs ?? Infinity);
  if (Number.isFinite(timeoutMs)) tool.timeoutMs = timeoutMs;
  if (spec.permissions.allowTargets !== undefined) tool.allowTargets = spec.permissions.allowTargets;
  return tool;
}

class RequirementsUnion {
  private flags: Pick<EnvironmentRequirements, 'cwd' | 'repoRoot' | 'container'> = {};
  private credentials: string[] = [];
  private capabilities: string[] = [];

  add(r: EnvironmentRequirements | undefined): void {
    if (r === undefined) return;
    if (r.cwd) this.flags.cwd = true;
    if (r.repoRoot) this.flags.repoRoot = true;
    if (r.container) this.flags.container = true;
    addNew(this.credentials, r.credentials);
    addNew(this.capabilities, r.capabilities);
  }

  value(): EnvironmentRequirements {
    const v: EnvironmentRequirements = { ...this.flags };
    if (this.credentials.length > 0) v.credentials = this.credentials;
    if (this.capabilities.length > 0) v.capabilities = this.capabilities;
    return v;
  }
}

class VerificationUnion {
  private commands: string[] = [];
  private checks: string[] = [];

  add(v: Verification | undefined): void {
    addNew(this.commands, v?.commands);
    addNew(this.checks, v?.checks);
  }

  value(): Verification {
    const v: Verification = {};
    if (this.commands.length > 0) v.commands = this.commands;
    if (this.checks.length > 0) v.checks = this.checks;
    return v;
  }
}

/** Appends the items `into` does not hold yet, in order. */
export function addNew(into: string[], items: readonly string[] | undefined): void {
  for (const item of items ?? []) if (!into.includes(item)) into.push(item);
}

/** The same text as one flat string (V8 keeps appended strings as ropes, which every read walks). */
function flat(text: string): string {
  return Buffer.from(text, 'utf8').toString('utf8');
}
